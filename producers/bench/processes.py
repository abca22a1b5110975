"""The stack's processes, found in /proc by the data folder in their environment: CPU and RSS.

Every process ops/ (or the test set-up) starts for a stack carries its ``ENGRAM_DATA_DIR``, so
the bench finds the same processes on its own stack and on a running one, whoever started them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    role: str
    cpu_s: float
    rss_mib: float


def _role(argv: list[str]) -> str:
    line = " ".join(argv)
    if "redis-server" in line:
        return "redis"
    if "java" in Path(argv[0]).name and "neo4j" in line:
        return "neo4j"
    if "celery" in line and " worker" in line and "-Q" in argv:
        return "worker " + argv[argv.index("-Q") + 1]
    if "celery" in line and " beat" in line:
        return "beat"
    if "workers.flower" in line:
        return "flower"
    if "supervisord" in line:
        return "supervisord"
    if " serve" in line or "uvicorn" in line:
        return "api"
    return "other"


def _environ_has(pid: str, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _pid_file(path: Path) -> str | None:
    try:
        return path.read_text().split()[0]
    except (OSError, IndexError):
        return None


def stack_processes(data_dir: Path) -> list[Proc]:
    """Processes whose environment names ``data_dir``, and Redis by its pid file (Redis writes its
    process title over its environment); this process is left out."""
    entry = f"ENGRAM_DATA_DIR={data_dir}".encode()
    redis = _pid_file(data_dir / "run" / "redis.pid")
    found: list[Proc] = []
    for entry_dir in Path("/proc").iterdir():
        pid = entry_dir.name
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        if pid != redis and not _environ_has(pid, entry):
            continue
        try:
            raw = (entry_dir / "cmdline").read_bytes().split(b"\0")
            argv = [a.decode(errors="replace") for a in raw if a]
            stat = (entry_dir / "stat").read_text()
            statm = (entry_dir / "statm").read_text().split()
        except OSError:
            continue
        if not argv:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        found.append(Proc(int(pid), _role(argv), cpu, int(statm[1]) * PAGE / 2**20))
    return [p for p in found if p.role != "other"]


def cpu_by_role(data_dir: Path) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for proc in stack_processes(data_dir):
        totals[proc.role] += proc.cpu_s
    return dict(totals)


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU-seconds each role spent between two readings (a process restarted counts from zero)."""
    return {role: round(max(0.0, after[role] - before.get(role, 0.0)), 2) for role in sorted(after)}


def rss_by_process(data_dir: Path) -> list[dict[str, object]]:
    return [
        {"pid": p.pid, "role": p.role, "rss_mib": round(p.rss_mib, 1)}
        for p in sorted(stack_processes(data_dir), key=lambda p: (p.role, p.pid))
    ]
