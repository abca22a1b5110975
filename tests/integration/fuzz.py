"""What the API fuzz run counts, printed at the end of the pytest run (conftest's summary hook)."""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field

# The quick profile of ./ops/test, or ENGRAM_FUZZ_EXAMPLES per operation (ops/fuzz: the full run).
QUICK_EXAMPLES = 25
EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", QUICK_EXAMPLES))


@dataclass
class Tally:
    requests: int = 0
    server_errors: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    # "ST202 Schema-valid request rejected": how many requests failed each check.
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    # "Schema-violating requests accepted" that were valid as sent (test_fuzz_api.py says which).
    not_violations: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        lines = [
            f"requests generated: {self.requests}",
            f"5xx: {self.server_errors}",
            f"schema violations (failed checks): {sum(self.failures.values())}",
            f"statuses: {statuses}",
        ]
        lines += [f"  {name}: {count}" for name, count in sorted(self.failures.items())]
        lines.append(
            f"not counted, valid as sent (a query string has no types, say): {len(self.not_violations)}"
        )
        return lines + [f"  {line}" for line in self.not_violations[:20]]


TALLY = Tally()
