"""``engram mcp``: the MCP server for agents, on stdio or over HTTP (``producers/mcp/``)."""

from __future__ import annotations

import argparse
from typing import Any

from producers.cli.common import identifier
from shared.errors import ConfigurationError, InvalidInput
from shared.settings import get_settings, is_loopback


def register(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp", help="an MCP server for agents (stdio, or --http): remember, recall, forget"
    )
    mcp.add_argument(
        "--user", dest="user_id", help="the tenant the agent's memory is (over HTTP: the API key's)"
    )
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp, not stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="with --http (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="with --http (default 8765)")
    mcp.set_defaults(run=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    if not args.http:
        from producers.mcp.server import serve

        if args.user_id is None:
            raise InvalidInput("engram mcp on stdio needs --user (the tenant the agent's memory is)")
        serve(identifier(args.user_id, "--user"))
        return 0
    from producers.mcp.http import serve as serve_http

    settings = get_settings()
    if settings.auth_mode == "local":
        if not is_loopback(args.host):
            raise ConfigurationError(f"ENGRAM_AUTH_MODE=local serves without API keys, so not on {args.host}")
        if args.user_id is None:
            raise InvalidInput("ENGRAM_AUTH_MODE=local has no keys to name the tenant: give --user")
    elif args.user_id is not None:
        raise InvalidInput("over HTTP each request's API key decides the tenant: drop --user")
    user = None if args.user_id is None else identifier(args.user_id, "--user")
    serve_http(settings, args.host, args.port, user)
    return 0
