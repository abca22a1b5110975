"""The fault stack (tests/faults/stack.py) with a Redis that fails over: a primary, one replica and
three Sentinels started by ops/lib/sentinel.sh, and every process of the stack (workers, producer,
the checks' own clients) reaching Redis through the Sentinels.

Ports: ENGRAM_SENTINEL_PORTS="base neo4j" [6730 and the fault suite's Neo4j port]; the data nodes
take base and base + 1, the Sentinels base + 2 to base + 4.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

import redis
from pydantic import SecretStr
from redis.sentinel import Sentinel

from shared.settings import Settings
from tests.faults.stack import DEFAULT_PORTS, ROOT, FaultStack, QdrantServerAddress, wait_for

MASTER = "engram"
SENTINELS = 3
REDELIVER_AFTER_S = 10
"""A short grace for the reconciler's resend of lost messages: the row waits it out once."""


class SentinelStack(FaultStack):
    """Redis as a primary, a replica and Sentinels; Neo4j and the workers as the fault stack's."""

    def __init__(
        self, data_dir: Path, base_port: int, neo4j_port: int, qdrant: QdrantServerAddress | None = None
    ) -> None:
        self.base_port = base_port
        self.sentinel_ports = [base_port + 2 + i for i in range(SENTINELS)]
        # The Sentinels' own password, made per run; the data nodes' is the data folder's secret.
        self.sentinel_password = secrets.token_urlsafe(24)
        super().__init__(data_dir, base_port, neo4j_port, qdrant)

    @classmethod
    def from_env(
        cls, data_dir: Path | None = None, qdrant: QdrantServerAddress | None = None
    ) -> SentinelStack:
        faults_neo4j = os.environ.get("ENGRAM_FAULTS_PORTS", DEFAULT_PORTS).split()[1]
        base, neo4j_port = os.environ.get("ENGRAM_SENTINEL_PORTS", f"6730 {faults_neo4j}").split()
        folder = data_dir or ROOT / ".engram-sentinel"
        return cls(folder, int(base), int(neo4j_port), qdrant)

    def _settings(self) -> Settings:
        return (
            super()
            ._settings()
            .model_copy(
                update={
                    "redis_sentinels": ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports),
                    "redis_sentinel_master": MASTER,
                    "redeliver_after_s": REDELIVER_AFTER_S,
                    "redis_sentinel_password": SecretStr(self.sentinel_password),
                }
            )
        )

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(
            ENGRAM_REDIS_SENTINELS=self.settings.redis_sentinels,
            ENGRAM_REDIS_SENTINEL_MASTER=MASTER,
            ENGRAM_REDIS_SENTINEL_PASSWORD=self.sentinel_password,
            ENGRAM_REDIS_REPLICA_PORT=str(self.base_port + 1),
            ENGRAM_REDELIVER_AFTER_S=str(REDELIVER_AFTER_S),
            **extra,
        )

    # Lifecycle: the Sentinels and both nodes instead of the one Redis.

    def open(self) -> None:
        if self.data_dir.exists():
            self._ops("source ops/lib/sentinel.sh && sentinel_stop")
        super().open()

    def close(self) -> None:
        super().close()
        try:
            self._ops("source ops/lib/sentinel.sh && sentinel_stop")
        except Exception as exc:  # keep tearing down
            print(f"sentinel: sentinel_stop: {exc}")

    def redis_start(self) -> None:
        """Starts what is not running (a killed node comes back) and waits until the Sentinels
        agree on a primary with its replica in sync."""
        self._ops("source ops/lib/sentinel.sh && sentinel_start")

    # The Sentinels' view.

    def primary_port(self) -> int | None:
        """The primary's port as the Sentinels name it (one that is not down in their eyes)."""
        sentinels = Sentinel(
            [("127.0.0.1", port) for port in self.sentinel_ports],
            sentinel_kwargs={
                "password": self.sentinel_password,
                "socket_timeout": 1,
                "socket_connect_timeout": 1,
            },
        )
        try:
            return int(sentinels.discover_master(MASTER)[1])
        except redis.RedisError:  # MasterNotFoundError: none answers, or none names a live one
            return None
        finally:
            for client in sentinels.sentinels:
                client.close()

    def node(self, port: int) -> redis.Redis:
        """A client of one data node, not through the Sentinels (to read what it holds)."""
        password = self.settings.redis_password
        return redis.Redis(
            port=port,
            password=password.get_secret_value() if password else None,
            socket_timeout=2,
            socket_connect_timeout=2,
        )

    def kill9_primary(self) -> int:
        """SIGKILLs the data node the Sentinels name primary; returns the port it served."""
        port = self.primary_port()
        if port is None:
            raise RuntimeError("no Sentinel names a primary")
        index = port - self.base_port
        pid = int((self.data_dir / "run" / f"redis-ha-{index}.pid").read_text().split()[0])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return port

    def wait_promotion(self, old_port: int, timeout_s: float = 60) -> float | None:
        """Seconds until every Sentinel names another primary and it answers as one; None past the bound."""
        started = time.monotonic()

        def promoted() -> bool:
            port = self.primary_port()
            if port is None or port == old_port:
                return False
            client = self.node(port)
            try:
                return bool(client.role()[0] == b"master")
            finally:
                client.close()

        if not wait_for(promoted, timeout_s, 0.02):
            return None
        return time.monotonic() - started
