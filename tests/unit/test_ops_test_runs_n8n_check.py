"""CI (``.ci/run``: ``./ops/test`` on a fresh clone) runs the n8n check: nothing ran it before, so
it broke silently when Qdrant Edge became the default (issue 29). ``ops/test``'s choice of what to
run is taken from the script itself and run in bash with each kind of command line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPS_TEST = (ROOT / "ops" / "test").read_text()


def choice(*args: str) -> tuple[int, int]:
    """(runs the n8n check, runs pytest) for ``./ops/test ARGS``, by ops/test's own lines."""
    block = re.search(r"^n8n_check=0.*?^fi$", OPS_TEST, re.S | re.M)
    assert block is not None, "ops/test no longer decides what to run in one block"
    script = block.group(0) + '\necho "$n8n_check $run_pytest"'
    out = subprocess.run(
        ["bash", "-c", script, "ops/test", *args], capture_output=True, text=True, check=True
    )
    check, pytest_ = out.stdout.split()
    return int(check), int(pytest_)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), (1, 1)),  # CI's run: the whole suite, then the check
        (("tests/unit", "-q"), (0, 1)),  # tests picked by hand: those only
        (("--n8n-check",), (1, 0)),  # the check alone
        (("--n8n-check", "tests/unit/test_ids.py"), (1, 1)),
    ],
)
def test_ops_test_runs_the_n8n_check_when_run_whole(args: tuple[str, ...], expected: tuple[int, int]) -> None:
    assert choice(*args) == expected


def test_ci_runs_ops_test_whole_and_ops_test_runs_the_check_and_keeps_its_exit_code() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "./ops/test" in ci  # no arguments: the whole suite, so the check
    assert "./ops/n8n-check || check_rc=$?" in OPS_TEST
    assert re.search(r"rc=\$check_rc", OPS_TEST) and OPS_TEST.rstrip().endswith('exit "$rc"')


def scaleout_choice(binary: Path, *args: str, qdrant: str = "edge") -> tuple[str, str, str]:
    """(pytest's arguments, whether the last lines say tests/scaleout did not run, whether the
    server pass runs) for ``ENGRAM_TEST_QDRANT=qdrant ./ops/test ARGS`` with the Qdrant server
    binary at ``binary``, by ops/test's own lines."""
    block = re.search(r"^n8n_check=0.*?^scaleout_skipped=0 server_pass=0$.*?^fi$", OPS_TEST, re.S | re.M)
    assert block is not None, "ops/test no longer decides about tests/scaleout after what to run"
    script = f"QDRANT_BIN={binary}\nENGRAM_TEST_QDRANT={qdrant}\n" + block.group(0)
    script += '\necho "$*|$scaleout_skipped|$server_pass"'
    out = subprocess.run(
        ["bash", "-c", script, "ops/test", *args], capture_output=True, text=True, check=True
    )
    pytest_args, skipped, server_pass = out.stdout.strip().split("|")
    return pytest_args, skipped, server_pass


@pytest.mark.parametrize(
    ("built", "args", "expected"),
    [
        # the server is built: the whole suite, tests/scaleout included, then the server pass
        (True, (), ("", "0", "1")),
        (False, (), ("--ignore=tests/scaleout", "1", "0")),  # not built: both left out, and said
        (False, ("tests/unit",), ("tests/unit", "0", "0")),  # tests picked by hand: as asked
        (True, ("tests/unit",), ("tests/unit", "0", "0")),
        (False, ("--n8n-check",), ("", "0", "0")),  # no pytest at all
    ],
)
def test_ops_test_leaves_scaleout_and_the_server_pass_out_only_where_the_server_is_not_built_and_says_so(
    tmp_path: Path, built: bool, args: tuple[str, ...], expected: tuple[str, str, str]
) -> None:
    binary = tmp_path / "qdrant"
    if built:
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)

    assert scaleout_choice(binary, *args) == expected
    assert "tests/scaleout did NOT run" in OPS_TEST and "./ops/qdrant-server build" in OPS_TEST
    assert "nor did the server pass" in OPS_TEST


def test_a_whole_run_already_on_the_server_has_no_second_pass(tmp_path: Path) -> None:
    binary = tmp_path / "qdrant"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)

    assert scaleout_choice(binary, qdrant="server") == ("", "0", "0")


def test_the_server_pass_runs_the_backup_tests_on_a_server_and_its_failure_counts() -> None:
    # The pass starts fresh services with a server, runs the tests marked backup, and its exit
    # code becomes ops/test's when nothing failed before it
    block = re.search(r"^if \(\(server_pass\)\); then$.*?^fi$", OPS_TEST, re.S | re.M)
    assert block is not None, "ops/test no longer runs the server pass in one block"
    assert "start_test_services server" in block.group(0)
    assert '"$VENV/bin/pytest" -m backup tests/integration tests/faults || server_rc=$?' in block.group(0)
    assert re.search(r"rc=\$server_rc", OPS_TEST)
