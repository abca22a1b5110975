"""The stack a bench runs against: one it starts itself (ops/lib, in a folder and on ports of its
own, as the fault suite's is), or the running one that the caller's ENGRAM_* settings name.

The bench's own stack is the ops/ one: Redis and Neo4j through ops/lib, the workers, beat and the
HTTP app under supervisord (``services_start``), so it measures what ``ops/demo`` runs. Only it
may be broken on purpose: Neo4j is stopped for real for the fallback measurement.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shared import secrets
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PORTS = (6621, 7921, 8121)  # redis, neo4j, api: beside the demo's, the tests' and the faults'


@dataclass(frozen=True, slots=True)
class Ports:
    redis: int
    neo4j: int
    api: int

    @classmethod
    def parse(cls, text: str) -> Ports:
        redis, neo4j, api = (int(p) for p in text.split())
        return cls(redis, neo4j, api)


class Stack:
    """The running stack: nothing is started or stopped."""

    owned = False

    def __init__(self, settings: Settings, api_url: str | None = None) -> None:
        self.settings = settings
        self.api_url = (api_url or f"http://127.0.0.1:{settings.api_port}").rstrip("/")

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def neo4j_stop(self) -> None:
        raise RuntimeError("the bench stops Neo4j only on a stack of its own")

    def neo4j_start(self) -> None:
        raise RuntimeError("the bench starts Neo4j only on a stack of its own")

    def restart_services(self, extra: dict[str, str]) -> None:
        raise RuntimeError("the bench restarts the workers only on a stack of its own")


class OwnStack(Stack):
    """Redis, Neo4j, the workers and the app in ``data_dir``, started from empty, torn down after."""

    owned = True

    def __init__(self, data_dir: Path, ports: Ports, say: Callable[[str], None]) -> None:
        self.data_dir = data_dir.resolve()
        self.ports = ports
        self._say = say
        super().__init__(self._settings(), f"http://127.0.0.1:{ports.api}")

    def _settings(self) -> Settings:
        """The caller's settings (model, Qdrant backend, ...) with this stack's folder and ports;
        its Redis password is the one in its own folder, never the caller's."""
        return Settings(
            data_dir=self.data_dir,
            redis_url=f"redis://127.0.0.1:{self.ports.redis}/0",
            redis_password=None,
            neo4j_uri=f"bolt://127.0.0.1:{self.ports.neo4j}",
            api_port=self.ports.api,
            flower_port=self.ports.api + 1,
        )

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        own = ("ENGRAM_REDIS_PASSWORD", "REDISCLI_AUTH")
        env = {k: v for k, v in os.environ.items() if k not in own}
        env.update(
            ENGRAM_ROOT=str(ROOT),
            ENGRAM_DATA_DIR=str(self.data_dir),
            ENGRAM_REDIS_URL=self.settings.redis_url,
            ENGRAM_NEO4J_URI=self.settings.neo4j_uri,
            ENGRAM_API_PORT=str(self.ports.api),
            ENGRAM_FLOWER_PORT=str(self.ports.api + 1),
        )
        # ops/lib waits 120 s for Neo4j; on a loaded 2-core machine a start takes longer.
        env.setdefault("ENGRAM_NEO4J_START_TIMEOUT", "300")
        env.update(extra or {})
        return env

    def _ops(self, functions: str, timeout_s: float = 600, extra: dict[str, str] | None = None) -> None:
        script = f"source ops/lib/neo4j.sh && source ops/lib/common.sh && {functions}"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            env=self.env(extra),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{functions} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")

    def open(self) -> None:
        if not (ROOT / "ops" / "lib" / "common.sh").exists():
            raise RuntimeError(f"no ops/lib under {ROOT}: the bench starts its stack from a checkout")
        if self.data_dir.exists():
            self._say(f"stack: stopping what a previous bench left in {self.data_dir}")
            self._ops("stop_all")
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True)
        (self.data_dir / ".gitignore").write_text("*\n")
        secrets.ensure(self.settings.redis_password_file)
        self.settings = self._settings()  # now with the folder's Redis password
        self._say(
            f"stack: starting Redis :{self.ports.redis}, Neo4j :{self.ports.neo4j}, the workers "
            f"and the app :{self.ports.api} in {self.data_dir}"
        )
        self._ops("redis_start")
        self.neo4j_start()
        self._ops("services_start")

    def close(self) -> None:
        self._say("stack: stopping")
        self._ops("stop_all")

    def neo4j_stop(self) -> None:
        self._ops("neo4j_stop", timeout_s=180)

    def restart_services(self, extra: dict[str, str]) -> None:
        """The workers, beat and the app restarted with ``extra`` settings over the stack's (the
        supervisor's programs take its environment, so the supervisor is restarted too)."""
        self._ops("supervisor_stop && services_start", extra=extra)

    def neo4j_start(self) -> None:
        """Neo4j gets 300 s (see ``env``), and a second try: a loaded machine can take that."""
        try:
            self._ops("neo4j_start")
        except RuntimeError:
            self._say("stack: Neo4j did not come up; starting it once more")
            self._ops("neo4j_start")
