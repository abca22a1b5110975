"""The connection every part of the Neo4j store shares: the driver, reads and writes, one
transaction, and Neo4j's errors and values as Engram's.

Every write is one parameterised ``UNWIND`` per batch inside one transaction, so a batch is either
all in or not at all. Driver errors leave the store as ``shared.errors`` types.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, LiteralString

import neo4j
from neo4j import GraphDatabase
from neo4j import exceptions as neo4j_errors
from neo4j.graph import Node

from shared.errors import ConfigurationError, GraphStoreRejected, ServiceUnavailable, TransientError
from shared.settings import Settings
from shared.stores.neo4j.graph import GraphWriter

READ = neo4j.READ_ACCESS
START_HINT = "start it with ./ops/demo, or set ENGRAM_NEO4J_URI"
Row = dict[str, Any]
# The server's notices Engram's drivers do not ask for: a property no store has yet (a migration's,
# a retry time before any failure), and each rule of the schema already there (or already gone)
# when a starting process makes the schema again (about fifty 600-character log lines a start).
QUIET = (
    neo4j.NotificationDisabledClassification.UNRECOGNIZED,
    neo4j.NotificationDisabledClassification.SCHEMA,
)

_PLAIN = frozenset({str, int, float, bool, type(None)})


def _native(value: Any) -> Any:
    """Neo4j temporal values become Python datetimes and nodes maps of their properties, also
    inside maps and lists; a list of numbers (an embedding) is returned as it is, unwalked. Plain
    values first: the abstract isinstance checks cost a search's rows a fifth of its time."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict | Node):
        return {key: _native(item) for key, item in value.items()}
    if isinstance(value, list):
        if value and type(value[0]) in (float, int):
            return value
        return [_native(item) for item in value]
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def _native_row(record: neo4j.Record) -> Row:
    # Not ``record.data()``: it walks every float of every vector read back, the sync's hot path.
    return {key: _native(value) for key, value in zip(record.keys(), record.values(), strict=True)}


# A read stopped by the timeout it was sent with (one-try reads: the searches'): the primary could
# not answer in time, which the search takes as the primary unavailable and asks the backup.
TIMED_OUT = "TransactionTimedOut"


@contextmanager
def translated_errors() -> Iterator[None]:
    try:
        yield
    except neo4j_errors.AuthError as exc:
        raise ConfigurationError(f"Neo4j refused the credentials: {exc.message}") from exc
    except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired, OSError) as exc:
        raise ServiceUnavailable("neo4j", " ".join(str(exc).split()), START_HINT) from exc
    except (neo4j_errors.TransientError, neo4j_errors.ClientError) as exc:
        if TIMED_OUT in (exc.code or ""):
            raise ServiceUnavailable("neo4j", f"a statement ran past its timeout: {exc.message}") from exc
        if isinstance(exc, neo4j_errors.TransientError):
            raise TransientError(f"Neo4j transient error: {exc.message}") from exc
        raise GraphStoreRejected(f"Neo4j refused the statement: {exc.code}: {exc.message}") from exc
    except neo4j_errors.DatabaseError as exc:
        raise TransientError(f"Neo4j database error: {exc.code}: {exc.message}") from exc


FILTERS_IN_VECTOR_INDEX_SINCE = (2026, 2)
SERVER_VERSION: LiteralString = (
    "CALL dbms.components() YIELD name, versions WHERE name = 'Neo4j Kernel' RETURN versions[0] AS version"
)


def version_of(text: str) -> tuple[int, int]:
    """(major, minor) of a Neo4j version ("5.26.30", "2026.08.1", "2026.08.1-SNAPSHOT"); (0, 0)
    for one it cannot read, which has no filters inside the index."""
    found = re.match(r"(\d+)\.(\d+)", text.strip())
    return (int(found[1]), int(found[2])) if found else (0, 0)


def version_rows(versions: Mapping[str, int]) -> list[Row]:
    return [{"id": memory_id, "version": version} for memory_id, version in versions.items()]


class Neo4jConnection:
    """The driver and what the store's parts share; the parts (schema.py, writes.py, ...) add
    their methods to it, and ``Neo4jStore`` is all of them."""

    def __init__(
        self,
        settings: Settings,
        driver: neo4j.Driver | None = None,
        graph: GraphWriter | None = None,
        one_try_reads: bool = False,
    ) -> None:
        """``one_try_reads``: each read is one auto-commit query (one round trip, never retried),
        where a managed transaction takes two (its commit) and retries: the searches' store."""
        self._settings = settings
        self._graph = graph
        self._one_try_reads = one_try_reads
        # A one-try read Neo4j holds (5.26's queryNodes on an index made again since it was looked
        # at) or runs long is stopped in time for the search to ask the backup within the wait.
        self._read_timeout_s = settings.search_timeout_s / 2
        self._database = settings.neo4j_database
        self._schema_ready: set[tuple[str, int]] = set()
        self._graph_schema_ready = False
        self._claims_guarded = False
        self._named_index_options: dict[str, Any] | None = None  # logged once, as held
        self._server_version: tuple[int, int] | None = None  # (5, 26), (2026, 8): read once
        # The search indexes as last read (the vector index holds the tenant? online?), and when.
        self._search_index_rows: tuple[float, dict[str, Row]] | None = None
        # Reentrant: a bootstrap holds it and claims, and a claim takes it for its guard (schema.py).
        self._schema_lock = threading.RLock()
        self._graph_lock = threading.Lock()  # the write worker's threads ask for the graph at once
        # The database the schema was made on (its store id), and when that was last checked.
        self._schema_store_id: str | None = None
        self._schema_checked_at = 0.0
        self._claims_checked_at = 0.0
        self._schema_check_s = settings.neo4j_schema_check_s
        self._retry_base_s = 5
        self._retry_cap_s = settings.reconcile_interval_s * 4
        self._driver = driver or GraphDatabase.driver(
            settings.neo4j_uri,
            auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
            max_connection_pool_size=settings.neo4j_max_pool_size,
            connection_acquisition_timeout=10.0,
            connection_timeout=5.0,
            # Celery retries tasks with backoff; the driver need not retry long on its own.
            max_transaction_retry_time=5.0,
            notifications_disabled_classifications=QUIET,
        )

    def close(self) -> None:
        self._driver.close()

    @property
    def graph(self) -> GraphWriter:
        """What derives sessions and entities in every write (made on first use: an extractor
        such as spaCy's loads a model)."""
        if self._graph is None:
            with self._graph_lock:
                if self._graph is None:
                    from shared.graph.extractors import make_extractor

                    s = self._settings
                    self._graph = GraphWriter(make_extractor(s), s.graph_related_entities)
        return self._graph

    def server_version(self) -> tuple[int, int]:
        """The server's (major, minor): (5, 26) for 5.26.x, (2026, 8) for 2026.08.x."""
        if self._server_version is None:
            rows = self._read(SERVER_VERSION)
            self._server_version = version_of(str(rows[0]["version"]) if rows else "")
        return self._server_version

    def filters_in_vector_index(self) -> bool:
        """Whether the server's vector index can hold the tenant and filter by it inside (Cypher
        25's ``SEARCH ... WHERE``, generally available from 2026.02)."""
        return self.server_version() >= FILTERS_IN_VECTOR_INDEX_SINCE

    def _read(self, query: LiteralString, **params: Any) -> list[Row]:
        with translated_errors():
            if self._one_try_reads:
                with self._driver.session(database=self._database, default_access_mode=READ) as session:
                    records = list(session.run(neo4j.Query(query, timeout=self._read_timeout_s), params))
            else:
                records, _, _ = self._driver.execute_query(
                    query, params, database_=self._database, routing_=neo4j.RoutingControl.READ
                )
        return [_native_row(record) for record in records]

    def _write(self, query: LiteralString, **params: Any) -> list[Row]:
        with translated_errors():
            records, _, _ = self._driver.execute_query(query, params, database_=self._database)
        return [record.data() for record in records]

    def _autocommit(self, query: LiteralString, **params: Any) -> None:
        """A statement in a transaction of its own making (``CALL ... IN TRANSACTIONS`` commits its
        batches itself, which a managed transaction does not allow)."""
        with translated_errors(), self._driver.session(database=self._database) as session:
            session.run(query, params).consume()

    def read_rows(self, query: LiteralString, **params: Any) -> list[Row]:
        """A read of another adapter over this connection (``neo4j_keys``)."""
        return self._read(query, **params)

    def write_rows(self, query: LiteralString, **params: Any) -> list[Row]:
        return self._write(query, **params)

    def _transaction(self, work: Any) -> Any:
        with translated_errors(), self._driver.session(database=self._database) as session:
            return session.execute_write(work)
