"""Prints docs/reference/cli.md, every ``engram`` command's ``--help``, from the command itself, so the
reference cannot drift from the code (tests/unit/test_docs.py compares the two).

.venv/bin/python ops/cli_reference.py > docs/reference/cli.md

The command is found as installed (the ``engram`` console script's entry point), not by module
path, and its subcommands are read from each help's own listing, so nothing here names a module.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points

# Help is wrapped to the terminal's width; a fixed one makes the output the same everywhere.
WIDTH = "100"
# A subcommand listed under its metavar (COMMAND, ACTION): four spaces, then its name.
_LISTED = re.compile(r"^    ([a-z][a-z0-9-]*)(?:\s{2,}|$)")


def _engram() -> Callable[[Sequence[str]], object]:
    (script,) = entry_points(group="console_scripts", name="engram")
    main: Callable[[Sequence[str]], object] = script.load()
    return main


def help_of(command: Sequence[str]) -> str:
    """``engram COMMAND... --help`` as argparse prints it."""
    out = io.StringIO()
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            _engram()([*command, "--help"])
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    return out.getvalue()


def subcommands(text: str) -> list[str]:
    """The subcommands a help lists under its metavar (none for a leaf command)."""
    names: list[str] = []
    listing = False
    for line in text.splitlines():
        if re.match(r"^  [A-Z]+$", line):
            listing = True
        elif listing and not line.strip():
            break
        elif listing and (found := _LISTED.match(line)):
            names.append(found.group(1))
    return names


def commands(prefix: Sequence[str] = ()) -> Iterator[tuple[list[str], str]]:
    """Every command path, depth first in the order the help lists them, with its help."""
    text = help_of(prefix)
    yield list(prefix), text
    for name in subcommands(text):
        yield from commands([*prefix, name])


def render() -> str:
    parts = [
        "# The `engram` command",
        "",
        "Every command's `--help`, printed by `.venv/bin/python ops/cli_reference.py > docs/reference/cli.md`"
        " (generated: edit the commands, not this file). Exit codes: 0 done, 1 some documents failed,"
        " 2 bad input, 3 a service is unavailable or too slow. What the commands are for:"
        " [the guide](../README.md).",
    ]
    for path, text in commands():
        parts += ["", f"## `{' '.join(['engram', *path])}`", "", "```text", text.rstrip("\n"), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
