"""``engram entities`` (list, search, show) and ``engram graph backfill``, registered by ``producers.cli``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from producers.cli.common import identifier
from producers.client import EngramClient
from shared.errors import InvalidInput
from shared.graph.entities import KINDS, normalise


def register(commands: Any) -> None:
    """Adds the graph's commands to the ``engram`` parser's subcommands."""
    entities = commands.add_parser("entities", help="a tenant's entities: list, search by name, show one")
    entity_commands = entities.add_subparsers(required=True, metavar="ACTION")
    listing = entity_commands.add_parser("list", help="entities, most mentioned first")
    listing.add_argument("--user", dest="user_id", required=True, help="the tenant")
    listing.add_argument("--prefix", help="names (or aliases) starting with this")
    listing.add_argument("--search", dest="text", help="names holding this")
    listing.add_argument("--kind", choices=KINDS)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--json", action="store_true", help="print the page as JSON")
    listing.set_defaults(run=_list)
    show = entity_commands.add_parser("show", help="one entity, its memories and related entities")
    show.add_argument("name")
    show.add_argument("--user", dest="user_id", required=True, help="the tenant")
    show.add_argument("--json", action="store_true", help="print the entity as JSON")
    show.set_defaults(run=_show)

    graph = commands.add_parser("graph", help="the derived graph: sessions, turn order, entities")
    graph_commands = graph.add_subparsers(required=True, metavar="ACTION")
    backfill = graph_commands.add_parser(
        "backfill", help="derive sessions, NEXT, entities and term vectors of older Memories (idempotent)"
    )
    backfill.add_argument("--user", dest="user_id", help="one tenant (default: every tenant)")
    backfill.add_argument("--page", type=int, default=500, help="Memories per transaction")
    backfill.set_defaults(run=_backfill)


def _tenant(value: str) -> str:
    return identifier(value, "--user")


def _name(option: str, value: str | None) -> str | None:
    if value is not None and not normalise(value):
        raise InvalidInput(f"{option} {value!r} has no letters or digits to match a name by")
    return value


def _list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 500 or args.offset < 0:
        raise InvalidInput("--limit is 1 to 500 and --offset at least 0")
    page = EngramClient().list_entities(
        _tenant(args.user_id),
        _name("--prefix", args.prefix),
        _name("--search", args.text),
        args.kind,
        args.limit,
        args.offset,
    )
    if args.json:
        print(page.model_dump_json(indent=2))
        return 0
    for entity in page.entities:
        print(f"{entity.name}  [{entity.kind}]  {entity.memories} memories")
    print(f"next offset: {page.next_offset}" if page.next_offset else f"{len(page.entities)} entities; end")
    return 0


def _show(args: argparse.Namespace) -> int:
    name = _name("name", args.name)
    assert name is not None
    entity = EngramClient().get_entity(_tenant(args.user_id), name)
    if entity is None:
        print(f"engram: no entity {args.name!r} for user {args.user_id!r}", file=sys.stderr)
        return 1
    if args.json:
        print(entity.model_dump_json(indent=2))
        return 0
    print(f"{entity.name}  [{entity.kind}]  {entity.memories} memories; aliases: {', '.join(entity.aliases)}")
    for memory in entity.mentioned_in:
        print(f"  {memory.id}  {' '.join(memory.content.split())[:100]}")
    for other in entity.related:
        print(f"  related: {other.name} [{other.kind}] x{other.count}")
    return 0


def _backfill(args: argparse.Namespace) -> int:
    if args.page < 1:
        raise InvalidInput("--page is at least 1")
    user_id = _tenant(args.user_id) if args.user_id is not None else None
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        print(f"\r{done} memories derived", end="", file=sys.stderr, flush=True)

    report = EngramClient().graph_backfill(user_id, args.page, tick)
    print(file=sys.stderr)
    print(report.model_dump_json())
    return 0
