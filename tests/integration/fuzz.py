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
    # "Invalid" query values that are valid text on the wire (tag=false): not failures.
    reads_as_text: int = 0

    def lines(self) -> list[str]:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        lines = [
            f"requests generated: {self.requests}",
            f"5xx: {self.server_errors}",
            f"schema violations (failed checks): {sum(self.failures.values())}",
            f"statuses: {statuses}",
            f"not counted: invalid query values that are valid text on the wire: {self.reads_as_text}",
        ]
        return lines + [f"  {name}: {count}" for name, count in sorted(self.failures.items())]


TALLY = Tally()
