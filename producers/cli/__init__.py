"""The ``engram`` command: bulk ingest, search, status, reconcile, reembed, and the HTTP app.

Each command is a module of this package with a ``register(commands)`` that adds its parser;
what they share is in ``common``. Exit codes: 0 done, 1 some documents failed, 2 bad input,
3 a service is unavailable or too slow.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from producers.bench import run as bench
from producers.cli import (
    evaluate,
    forget,
    graph,
    ingest,
    keys,
    listing,
    mcp,
    reconcile,
    reembed,
    replay,
    restore,
    search,
    serve,
    status,
)
from shared import logging_setup
from shared.errors import ConfigurationError, InvalidInput, RestoreRunning, SearchTimeout, ServiceUnavailable
from shared.settings import get_settings

# In the order ``engram --help`` lists them.
COMMANDS = (
    ingest,
    search,
    status,
    forget,
    replay,
    listing,
    reconcile,
    reembed,
    keys,
    evaluate,
    mcp,
    graph,
    serve,
    restore,
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Text as Python writes it, unless ENGRAM_LOG_FORMAT asks (engram serve: its own, below).
    fmt = logging_setup.resolved_format(get_settings(), service=False)
    if fmt is not None and args.run is not serve._serve:
        logging_setup.configure(fmt, get_settings().log_level.upper())
    # The driver warns on each retry of a refused connection; the one line below says it all.
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    try:
        result: int = args.run(args)
        return result
    except (InvalidInput, ConfigurationError, RestoreRunning) as exc:
        print(f"engram: error: {exc}", file=sys.stderr)
        return 2
    except (ServiceUnavailable, SearchTimeout) as exc:
        print(f"engram: error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("engram: interrupted; what was enqueued stays enqueued", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Queue-driven long-term memory.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    bench.register(commands)
    return parser
