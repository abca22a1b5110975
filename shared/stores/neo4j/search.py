"""What a search reads (shared/search/sources.py, graph_sources.py): candidates of the vector
index, an exact scan and the fulltext index, the statistics of keywords, and the graph's
candidates beside the first hits."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import LiteralString

from shared.errors import GraphStoreRejected, ServiceUnavailable
from shared.stores.neo4j import graph_queries as gq
from shared.stores.neo4j import schema_queries as q
from shared.stores.neo4j import search_queries as sq
from shared.stores.neo4j.connection import Neo4jConnection, Row
from shared.stores.neo4j.graph import BESIDE_CANDIDATES, ENTITY_CANDIDATES

SEARCH_INDEX_NAMES = (q.VECTOR_INDEX, sq.FULLTEXT_INDEX)
INDEX_OFFLINE_HINT = "searches are served by the backup until it is online"


def _vector_statement(index: Row) -> LiteralString:
    """SEARCH where the index holds the tenant (2026.02+), queryNodes where it does not."""
    return sq.VECTOR_CANDIDATES_IN_INDEX if "user_id" in index["properties"] else sq.VECTOR_CANDIDATES


class SearchOps(Neo4jConnection):
    def count_filtered(self, filters: Row, limit: int) -> int:
        """How many Memories pass the tenant and filters, counted up to ``limit``."""
        return int(self._read(sq.COUNT_FILTERED, limit=limit, **filters)[0]["n"])

    def vector_candidates(
        self, vector: Sequence[float], k: int, filters: Row, keep: int
    ) -> tuple[int, list[Row]]:
        """(rows the index gave, the first ``keep`` passing the filters, nearest first):
        {memory, score as (1 + cos) / 2}. Raises ``ServiceUnavailable`` while the index is not
        online."""
        params = {"vector": list(vector), "k": k, "keep": keep, **filters}
        row = self._index_read(q.VECTOR_INDEX, _vector_statement, params)
        return int(row["found"]), list(row["kept"])

    def tenant_in_vector_index(self) -> bool:
        """Whether the online vector index holds the tenant: a 5.26 store upgraded in place keeps
        its index without it until it is made again, and searches then change over by themselves."""
        index = self._search_indexes().get(q.VECTOR_INDEX)
        return index is not None and index["state"] == "ONLINE" and "user_id" in index["properties"]

    def _search_indexes(self) -> dict[str, Row]:
        """The search indexes by name, as SHOW INDEXES gives them: trusted for
        ``neo4j_schema_check_s`` once all are online (a 5.26 store's vector index without the
        tenant, made again, is searched with it within that), read again at every ask while one
        is not."""
        now = time.monotonic()
        known = self._search_index_rows
        if known is None or now - known[0] > self._schema_check_s:
            rows = self._read(sq.SEARCH_INDEXES, names=list(SEARCH_INDEX_NAMES))
            known = (now, {str(row["name"]): row for row in rows})
            online = all(known[1].get(name, {}).get("state") == "ONLINE" for name in SEARCH_INDEX_NAMES)
            self._search_index_rows = known if online else None
        return known[1]

    def _online_index(self, name: str) -> Row:
        """The index ``name``; ``ServiceUnavailable`` naming its state when it is not online."""
        index = self._search_indexes().get(name)
        if index is None or index["state"] != "ONLINE":
            state = "absent"
            if index is not None:
                state = f"{str(index['state']).lower()} ({index['percent'] or 0:.0f}%)"
            raise ServiceUnavailable("neo4j", f"the index {name} is {state}", INDEX_OFFLINE_HINT)
        return index

    def _index_read(self, name: str, statement: Callable[[Row], LiteralString], params: Row) -> Row:
        """A read through the index ``name``, asked only while it is online (Neo4j would hold it
        until a populating index is online: 11.5 s for 10,000 vectors here). An index dropped or
        made again since it was looked at is looked at again, and the read made once more."""
        try:
            return self._read(statement(self._online_index(name)), **params)[0]
        except GraphStoreRejected:
            self._search_index_rows = None
            return self._read(statement(self._online_index(name)), **params)[0]

    def exact_candidates(self, vector: Sequence[float], k: int, filters: Row) -> list[Row]:
        return list(self._read(sq.EXACT_CANDIDATES, vector=list(vector), k=k, **filters)[0]["kept"])

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: Row
    ) -> tuple[int, list[Row]]:
        params = {"text": text, "vector": list(vector), "k": k, **filters}
        row = self._index_read(sq.FULLTEXT_INDEX, lambda _: sq.FULLTEXT_CANDIDATES, params)
        return int(row["found"]), list(row["kept"])

    def term_frequencies(self, user_id: str, queries: Mapping[str, str], cap: int) -> dict[str, int]:
        """Per term, how many of the tenant's Memories hold it (up to ``cap``); ``queries`` maps
        each term to its Lucene query, whose clause of the tenant's token makes it the tenant's."""
        params = [{"term": term, "lucene": lucene} for term, lucene in queries.items()]
        rows = self._read(sq.TERM_FREQUENCIES, queries=params, cap=cap)
        return {row["term"]: int(row["df"]) for row in rows}

    def tenant_stats(self, user_id: str) -> tuple[int, float]:
        """(Memories the tenant holds, their mean token count)."""
        row = self._read(sq.TENANT_STATS, user_id=user_id)[0]
        return int(row["documents"] or 0), float(row["average_length"] or 0.0)

    def newest_memory(self, user_id: str) -> datetime | None:
        """When the tenant's newest memory was made (none when it holds none)."""
        newest = self._read(sq.NEWEST_MEMORY, user_id=user_id)[0]["newest"]
        return newest if isinstance(newest, datetime) else None

    def feedback_scores(
        self, user_id: str, best: Sequence[str], ids: Sequence[str], query: Sequence[float], weight: float
    ) -> tuple[list[float], dict[str, tuple[float, float]]]:
        """The query moved toward the mean of ``best``'s vectors by ``weight`` (``query`` of unit
        length; the moved one not), and per memory of ``ids`` its cosine with ``query`` and with
        the moved vector (each as (1 + cos) / 2): one read."""
        params = {"user_id": user_id, "best": list(best), "ids": list(ids), "original": list(query)}
        rows = self._read(sq.FEEDBACK_SCORES, **params, weight=weight)
        if not rows:  # no $ids: UNWIND of nothing
            return list(query), {}
        scores = {str(i): (float(o), float(m)) for i, o, m in rows[0]["scores"]}
        return [float(x) for x in rows[0]["moved"]], scores

    def two_scores(
        self, user_id: str, ids: Sequence[str], query: Sequence[float], moved: Sequence[float]
    ) -> dict[str, tuple[float, float]]:
        """Per memory, its cosine with ``query`` and with ``moved`` (each as (1 + cos) / 2)."""
        rows = self._read(
            sq.TWO_SCORES, user_id=user_id, ids=list(ids), original=list(query), moved=list(moved)
        )
        return {row["id"]: (float(row["original"]), float(row["moved"])) for row in rows}

    def stored_documents(self, keys: Sequence[str]) -> int:
        return int(self._read(sq.STORED_DOCUMENTS, keys=list(keys))[0]["n"] or 0)

    def entity_candidates(
        self, keys: Sequence[str], max_memories: int, vector: Sequence[float], k: int, filters: Row
    ) -> list[Row]:
        """Memories naming the tenant's entities of these keys (shared/search/graph_sources.py)."""
        params = {"keys": list(keys), "max_memories": max_memories, "vector": list(vector), "k": k}
        return list(self._read(ENTITY_CANDIDATES, **params, **filters)[0]["kept"])

    def beside_candidates(self, ids: Sequence[str], vector: Sequence[float], filters: Row) -> list[Row]:
        """The memories next to these along NEXT: the turns around a turn, the chunks around a chunk."""
        return list(self._read(BESIDE_CANDIDATES, ids=list(ids), vector=list(vector), **filters)[0]["kept"])

    def mentions_among(
        self, user_id: str, keys: Sequence[str], max_memories: int, ids: Sequence[str]
    ) -> dict[str, tuple[int, list[str]]]:
        """Per entity key of the tenant named by at most ``max_memories`` memories: how many name
        it, and which of ``ids`` do."""
        params = {"user_id": user_id, "keys": list(keys), "max_memories": max_memories, "ids": list(ids)}
        return {r["key"]: (int(r["n"]), list(r["ids"])) for r in self._read(gq.MENTIONS_AMONG, **params)}

    def next_among(self, user_id: str, ids: Sequence[str]) -> list[tuple[str, str]]:
        """The NEXT edges between these memories."""
        return [(r["a"], r["b"]) for r in self._read(gq.NEXT_AMONG, user_id=user_id, ids=list(ids))]

    def neighbours(self, user_id: str, ids: Sequence[str], n: int) -> dict[str, tuple[list[str], list[str]]]:
        rows = self._read(sq.NEIGHBOURS, user_id=user_id, ids=list(ids), n=n)
        return {row["id"]: (list(row["before"]), list(row["after"])) for row in rows}
