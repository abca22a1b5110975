"""``engram serve``: the HTTP app under uvicorn, with strict framing and capped connections."""

from __future__ import annotations

import argparse
from typing import Any

from shared import logging_setup
from shared.errors import ConfigurationError
from shared.settings import get_settings, is_loopback


def register(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the HTTP app")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="app processes (default ENGRAM_API_WORKERS)")
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    host = args.host or settings.api_host
    if settings.auth_mode == "local" and not is_loopback(host):
        raise ConfigurationError(f"ENGRAM_AUTH_MODE=local serves without API keys, so not on {host}")
    # Several processes share the port (uvicorn's supervisor restarts one that dies); each has
    # its own event loop, thread pool and bound of waiting searches. The access log names paths
    # without their query strings (shared/log_privacy.py).
    # Every logger, uvicorn's and ours, one JSON object a line (ENGRAM_LOG_FORMAT=text: for people).
    fmt = logging_setup.resolved_format(settings, service=True) or "json"
    log_config = logging_setup.uvicorn_config(fmt, settings.log_level)
    # httptools (llhttp) parses strictly: a request with both Content-Length and
    # Transfer-Encoding, or a header line ended by a bare LF, is a 400 and the connection closed
    # (RFC 9112 §6.1: the framing a proxy in front may read otherwise: request smuggling). Its
    # subclass closes a connection whose headers come too slowly (producers/http/slow_clients.py) and
    # caps connections per client and in all (producers/http/connections.py).
    uvicorn.run(
        "producers.http.app:app",
        http="producers.http.connections:GatedHttpToolsProtocol",
        # The connections are capped by the protocol (per client, idle ones closed first); uvicorn's
        # own bound, a 503 to every request past it, only backs it up (producers/http/connections.py).
        limit_concurrency=2 * settings.api_max_connections,
        timeout_keep_alive=settings.api_keep_alive_s,
        log_config=log_config,
        host=host,
        port=args.port or settings.api_port,
        workers=args.workers or settings.api_workers,
    )
    return 0
