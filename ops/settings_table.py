"""Prints the settings table of docs/reference/settings.md from shared/settings/, so the two
cannot drift apart (tests/unit/test_docs.py compares them).

.venv/bin/python ops/settings_table.py   # then replace the table in docs/reference/settings.md
"""

from __future__ import annotations

from typing import Any

from shared.settings import Settings


def default_of(name: str) -> Any:
    field = Settings.model_fields[name]
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if hasattr(value, "get_secret_value"):
        return "engram-dev-password"
    return "—" if value is None else value


def main() -> None:
    print("| variable | default | meaning |")
    print("|---|---|---|")
    for name, field in Settings.model_fields.items():
        print(f"| `ENGRAM_{name.upper()}` | `{default_of(name)}` | {field.description} |")


if __name__ == "__main__":
    main()
