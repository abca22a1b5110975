"""The documentation holds together: every relative link in README.md and docs/**/*.md reaches a file
(and, with an anchor, a heading of it), and the generated references are what their scripts print
now, so a setting or a command changed in the code cannot leave its page behind.

Links are found as ../shared/tools/house_check.py finds them (any ``](target)``, code blocks
included); anchors are read as GitHub makes them from headings.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page`` (not those in fenced code)."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"^#{1,6} (.*)$", line)):
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            n, unique = 0, slug
            while unique in found:
                n += 1
                unique = f"{slug}-{n}"
            found.add(unique)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        reached = (page.parent / path).resolve() if path else page
        if not reached.exists():
            broken.append(f"{target}: no such file")
        elif anchor and reached.suffix == ".md" and anchor not in anchors(reached):
            broken.append(f"{target}: no such heading")
    return broken


def script(name: str) -> ModuleType:
    """A script of ops/ (no package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "ops" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = {str(page.relative_to(ROOT)): found for page in pages() if (found := broken_links(page))}

    assert broken == {}


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading: `with code`\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading-with-code) [no file](gone.md) [no heading](other.md#not-a-heading)"
        " [web](https://example.com/x.md) [here](#title)\n\n# Title\n"
    )

    assert broken_links(page) == ["gone.md: no such file", "other.md#not-a-heading: no such heading"]


def test_the_settings_reference_is_the_table_settings_table_prints() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        script("settings_table").main()
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    table = [line for line in page.splitlines() if line.startswith("|")]

    assert table == printed.getvalue().splitlines()


def test_the_cli_reference_is_what_every_commands_help_prints() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")

    assert page == script("cli_reference").render()
