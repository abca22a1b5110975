"""``engram keys``: the HTTP app's API keys made, listed, rotated and revoked."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from producers.cli.common import identifier
from producers.client import EngramClient
from shared.auth import KeyInfo
from shared.confusables import confusable_with
from shared.errors import InvalidInput
from shared.models import utc_now
from shared.settings import get_settings


def register(commands: Any) -> None:
    keys = commands.add_parser("keys", help="API keys of the HTTP app: create, list, revoke")
    key_commands = keys.add_subparsers(required=True, metavar="ACTION")
    create = key_commands.add_parser("create", help="make a key; it is shown once")
    who = create.add_mutually_exclusive_group(required=True)
    who.add_argument("--tenant", help="the one tenant (user_id) the key acts for")
    who.add_argument("--admin", action="store_true", help="a key for every tenant and the store's status")
    create.add_argument(
        "--strict-tenants",
        action="store_true",
        help="refuse a tenant a reader could take for an existing one (else a warning)",
    )
    create.add_argument("--name", default="", help="what it is for, e.g. n8n")
    create.add_argument(
        "--signing", action="store_true", help="also a signing secret, for HMAC-signed webhooks"
    )
    create.add_argument("--json", action="store_true")
    create.set_defaults(run=_keys_create)
    listing_keys = key_commands.add_parser("list", help="every key, revoked ones too (no secrets)")
    listing_keys.add_argument("--json", action="store_true")
    listing_keys.set_defaults(run=_keys_list)
    rotate = key_commands.add_parser(
        "rotate", help="a new signing secret for a key (shown once); the old one stops signing"
    )
    rotate.add_argument("key_id", help="the key's id, or the key itself")
    rotate.set_defaults(run=_keys_rotate)
    revoke = key_commands.add_parser("revoke", help="a key stops working (within ENGRAM_AUTH_CACHE_S)")
    revoke.add_argument("key_id", help="the id that keys list shows (or the whole key)")
    revoke.set_defaults(run=_keys_revoke)


def _keys_create(args: argparse.Namespace) -> int:
    tenant = None if args.admin else identifier(args.tenant)
    client = EngramClient()
    if tenant is not None:
        known = {key.tenant for key in client.key_store().list_keys() if key.tenant}
        alike = confusable_with(tenant, known)
        if alike:
            said = f"tenant {tenant!r} reads like {', '.join(map(repr, alike))} (Unicode confusables)"
            if args.strict_tenants or get_settings().strict_tenants:
                raise InvalidInput(f"{said}; refused (--strict-tenants, ENGRAM_STRICT_TENANTS)")
            print(f"warning: {said}", file=sys.stderr)
    made = client.create_key(args.name, tenant, signing=args.signing)
    if args.json:
        print(made.model_dump_json(indent=2))
        return 0
    scope = f"tenant {tenant!r}" if tenant else "admin (every tenant)"
    print(f"key {made.info.id} for {scope}; shown once, keep it secret:")
    print(made.key)
    if made.signing_secret:
        print(f"signing secret for webhooks (X-Engram-Key-Id: {made.info.id}):")
        print(made.signing_secret)
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    keys = [KeyInfo.of(key) for key in EngramClient().key_store().list_keys()]
    if args.json:
        print(json.dumps([key.model_dump(mode="json") for key in keys], indent=2))
        return 0
    for key in keys:
        scope = f"tenant {key.tenant}" if key.tenant else "admin"
        revoked = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        signed = ", signed webhooks" if key.signed_webhooks else ""
        print(f"{key.id}  {scope:<24} {revoked:<24} {key.created_at:%Y-%m-%d}  {key.name}{signed}")
    print(f"{len(keys)} keys")
    return 0


def _keys_rotate(args: argparse.Namespace) -> int:
    key_id = args.key_id.split("_")[1] if args.key_id.startswith("egk_") else args.key_id
    secret = EngramClient().rotate_signing_secret(key_id)
    print(f"new signing secret for webhooks (X-Engram-Key-Id: {key_id}); shown once, keep it secret:")
    print(secret)
    print("the old one stops signing within ENGRAM_AUTH_CACHE_S")
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    key_id = args.key_id.split("_")[1] if args.key_id.startswith("egk_") else args.key_id
    if not EngramClient().key_store().revoke_key(key_id, utc_now()):
        raise InvalidInput(f"no key {key_id!r}")
    print(f"revoked {key_id}; it stops working within ENGRAM_AUTH_CACHE_S")
    return 0
