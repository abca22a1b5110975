"""``python -m tests.faults`` (or ``ops/faults``): runs the fault scenarios on an isolated stack.

Prints a header with the settings that decide recovery and a table (or, with ``--json``, one JSON
object per scenario on stdout); progress goes to stderr. Exits 1 if any scenario missed parity.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

from tests.faults import report
from tests.faults.scenarios import SCENARIOS
from tests.faults.stack import FaultStack
from tests.faults.trial import Context, Options, ScenarioResult


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ops/faults", description=__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON object per scenario")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME[,NAME]",
        help="run these scenarios (repeatable, or comma-separated)",
    )
    parser.add_argument("--docs", type=int, help="documents per scenario (600; 60 with --quick)")
    parser.add_argument(
        "--quick", action="store_true", help="60 documents, a 30 s Neo4j outage, shorter bounds"
    )
    parser.add_argument(
        "--repair-timeout", type=float, help="bound of each wait for recovery, s (240; 180 quick)"
    )
    parser.add_argument("--neo4j-outage", type=float, help="how long Neo4j stays down, s (300; 30 quick)")
    parser.add_argument("--soak", action="store_true", help="run the chaos soak (as --only soak)")
    parser.add_argument("--seed", type=int, help="the soak's schedule (drawn and printed when not given)")
    parser.add_argument("--minutes", type=float, help="the soak's length, min (10; 1.5 with --quick)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser


def options_of(args: argparse.Namespace) -> Options:
    quick = bool(args.quick)
    return Options(
        docs=args.docs or (60 if quick else 600),
        quick=quick,
        repair_timeout_s=args.repair_timeout or (180.0 if quick else 240.0),
        neo4j_outage_s=args.neo4j_outage or (30.0 if quick else 300.0),
        seed=args.seed,
        soak_minutes=args.minutes,
    )


def run(context: Context, name: str) -> ScenarioResult:
    """One scenario from clean data; an error in it is a failed result, not the end of the run."""
    try:
        context.stack.reset()
        return SCENARIOS[name](context)
    except Exception as exc:
        return ScenarioResult(name, 0, 0, 0, 0, False, None, detail=f"error: {type(exc).__name__}: {exc}")


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for name, scenario in SCENARIOS.items():
            print(f"{name:26} {(scenario.__doc__ or '').splitlines()[0]}")
        return 0
    options = options_of(args)
    named = [name for names in args.only or () for name in names.split(",") if name]
    unknown = sorted(set(named) - set(SCENARIOS))
    if unknown:
        _parser().error(f"unknown scenario {', '.join(unknown)} (see --list)")
    names = [*named, *(["soak"] if args.soak and "soak" not in named else [])] or list(SCENARIOS)
    stack = FaultStack.from_env()
    signal.signal(signal.SIGTERM, _interrupted)
    head = report.header(stack.settings, options)
    print(head, file=sys.stderr if args.json else sys.stdout, flush=True)
    print(f"faults: starting the stack in {stack.data_dir}", file=sys.stderr, flush=True)
    results: list[ScenarioResult] = []
    try:
        stack.open()
        context = Context(stack, options)
        try:
            for name in names:
                started = time.monotonic()
                result = run(context, name)
                results.append(result)
                took = time.monotonic() - started
                print(f"faults: {name}: parity {result.parity} in {took:.0f} s", file=sys.stderr, flush=True)
                if args.json:
                    print(report.json_line(result), flush=True)
        finally:
            context.close()
    finally:
        stack.close()
    if not args.json:
        print(report.table(results))
    return 0 if results and all(r.parity for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
