"""The test suite's own layout holds: what suites share lives in helper modules (a test module
imported by another runs its tests' imports twice and hides what is shared), and every module of
tests/integration and tests/scaleout says it needs the real services (the ``integration`` marker)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, inside functions too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def marks(path: Path) -> set[str]:
    """The marker names of a module's ``pytestmark`` (one mark or a list of them)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and n.attr != "mark"}
    return set()


def test_no_test_module_imports_another() -> None:
    importing = {
        str(path.relative_to(TESTS)): sorted(name for name in imported_modules(path) if ".test_" in name)
        for path in sorted(TESTS.rglob("*.py"))
    }

    assert {module: names for module, names in importing.items() if names} == {}


def test_every_integration_module_is_marked_integration() -> None:
    unmarked = [
        path.name
        for folder in ("integration", "scaleout")
        for path in sorted((TESTS / folder).glob("test_*.py"))
        if "integration" not in marks(path)
    ]

    assert unmarked == []
