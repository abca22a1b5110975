"""The ``engram`` command: bulk ingest, search, status, reconcile, reembed, and the HTTP app.

Exit codes: 0 done, 1 some documents failed, 2 bad input, 3 a service is unavailable or too slow.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import TypeAdapter, ValidationError

from producers import restore_cli
from producers.bench import run as bench
from producers.client import EngramClient
from producers.files import read_documents
from producers.graph_cli import register as register_graph_commands
from producers.waiting import LoadProgress
from shared import logging_setup
from shared.auth import KeyInfo
from shared.confusables import confusable_with
from shared.errors import ConfigurationError, InvalidInput, RestoreRunning, SearchTimeout, ServiceUnavailable
from shared.ids import document_key
from shared.models import DeleteResult, DocumentIn, Identifier, SearchFilters, SearchRequest, utc_now
from shared.services.reembed import Progress as ReembedProgress
from shared.services.refs import DocRef
from shared.settings import get_settings, is_loopback


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Text as Python writes it, unless ENGRAM_LOG_FORMAT asks (engram serve: its own, below).
    fmt = logging_setup.resolved_format(get_settings(), service=False)
    if fmt is not None and args.run is not _serve:
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

    ingest = commands.add_parser("ingest", help="enqueue files, folders or JSONL for ingestion")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    _scope_arguments(ingest, user_required=False)
    ingest.add_argument("--memory-type", help="memory_type of documents that do not say")
    ingest.add_argument("--batch", type=int, help="documents per ingest task")
    ingest.add_argument("--no-wait", action="store_true", help="return once enqueued")
    ingest.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the load")
    ingest.add_argument(
        "--force", action="store_true", help="chunk, embed and write documents stored unchanged too"
    )
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="keep the tenant's documents from this folder in step with it: add new files, update "
        "changed ones, forget those gone from it (in both stores)",
    )
    ingest.add_argument("--dry-run", action="store_true", help="with --sync: list what it would do")
    ingest.add_argument("--json", action="store_true", help="print one JSON object when finished")
    ingest.set_defaults(run=_ingest)

    search = commands.add_parser("search", help="search memories through the query queue")
    search.add_argument("query")
    _scope_arguments(search, user_required=True)
    search.add_argument("--top-k", type=int)
    search.add_argument("--threshold", type=float)
    search.add_argument("--memory-type", action="append", dest="memory_types")
    search.add_argument("--tag", action="append", dest="tags")
    search.add_argument("--json", action="store_true", help="print the raw response")
    search.add_argument("--timeout", type=float)
    search.set_defaults(run=_search)

    status = commands.add_parser("status", help="a document's status, or the whole store's")
    status.add_argument("document_id", nargs="?")
    status.add_argument("--user", dest="user_id")
    status.set_defaults(run=_status)

    forget = commands.add_parser(
        "forget", help="delete documents, or the tenant's memories matching filters, from both stores"
    )
    forget.add_argument("document_ids", nargs="*", metavar="DOCUMENT_ID")
    _scope_arguments(forget, user_required=True)
    _filter_arguments(forget)
    forget.add_argument("--memory-id", action="append", dest="memory_ids", help="one memory, by its id")
    forget.add_argument("--all", action="store_true", help="every memory of the tenant")
    forget.set_defaults(run=_forget)

    replay = commands.add_parser(
        "replay", help="re-drive documents that failed for good, from what is staged"
    )
    replay.add_argument(
        "document_ids", nargs="*", metavar="DOCUMENT_ID", help="these (with --user), else every failed one"
    )
    replay.add_argument("--user", dest="user_id", help="the tenant of the documents named")
    replay.set_defaults(run=_replay)

    listing = commands.add_parser("list", help="list a tenant's memories, a page at a time")
    _scope_arguments(listing, user_required=True)
    _filter_arguments(listing)
    listing.add_argument("--document", dest="document_id")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor", help="the next_cursor a previous page printed")
    listing.add_argument("--json", action="store_true", help="print the raw page")
    listing.set_defaults(run=_list)

    reconcile = commands.add_parser("reconcile", help="re-sync what Qdrant is missing, find drift both ways")
    reconcile.add_argument("--dry-run", action="store_true", help="only report")
    reconcile.add_argument("--no-wait", action="store_true")
    reconcile.add_argument(
        "--force", action="store_true", help="let a mass deletion of orphan points through"
    )
    reconcile.set_defaults(run=_reconcile)

    reembed = commands.add_parser(
        "reembed",
        help="re-embed everything with the configured model and switch to it (start or resume)",
    )
    reembed.add_argument("--status", action="store_true", help="show the migration and its progress")
    reembed.add_argument(
        "--drop-old", action="store_true", help="after the switch, drop the old model's Qdrant collection"
    )
    reembed.add_argument("--no-wait", action="store_true", help="return once the pages are enqueued")
    reembed.add_argument("--page", type=int, help="memories per task")
    reembed.add_argument("--timeout", type=float, default=24 * 3600.0, help="seconds to wait for it")
    reembed.set_defaults(run=_reembed)

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

    evaluation = commands.add_parser(
        "eval", help="ingest a BEIR or LoCoMo set through the pipeline and measure search on it"
    )
    evaluation.add_argument(
        "dataset", type=Path, nargs="?", metavar="DATASET", help="a BEIR folder or a LoCoMo JSON file"
    )
    evaluation.add_argument(
        "--suite", type=Path, metavar="DIR", help="every set under DIR: one table, methods x sets"
    )
    evaluation.add_argument(
        "--reuse", action="store_true", help="skip the ingest when the set's tenant already holds it"
    )
    evaluation.add_argument("--json", action="store_true", help="print one JSON object")
    evaluation.set_defaults(run=_eval)

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

    register_graph_commands(commands)

    serve = commands.add_parser("serve", help="run the HTTP app")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="app processes (default ENGRAM_API_WORKERS)")
    serve.set_defaults(run=_serve)
    restore_cli.register(commands)
    bench.register(commands)
    return parser


def _mcp(args: argparse.Namespace) -> int:
    if not args.http:
        from producers.mcp_server import serve

        if args.user_id is None:
            raise InvalidInput("engram mcp on stdio needs --user (the tenant the agent's memory is)")
        serve(_identifier(args.user_id, "--user"))
        return 0
    from producers.mcp_http import serve as serve_http

    settings = get_settings()
    if settings.auth_mode == "local":
        if not is_loopback(args.host):
            raise ConfigurationError(f"ENGRAM_AUTH_MODE=local serves without API keys, so not on {args.host}")
        if args.user_id is None:
            raise InvalidInput("ENGRAM_AUTH_MODE=local has no keys to name the tenant: give --user")
    elif args.user_id is not None:
        raise InvalidInput("over HTTP each request's API key decides the tenant: drop --user")
    user = None if args.user_id is None else _identifier(args.user_id, "--user")
    serve_http(settings, args.host, args.port, user)
    return 0


def _scope_arguments(parser: argparse.ArgumentParser, user_required: bool) -> None:
    parser.add_argument("--user", dest="user_id", required=user_required, help="the tenant")
    parser.add_argument("--project", dest="project_id")
    parser.add_argument("--session", dest="session_id")


def _ingest(args: argparse.Namespace) -> int:
    defaults = {
        key: value
        for key, value in {
            "user_id": args.user_id,
            "project_id": args.project_id,
            "session_id": args.session_id,
            "memory_type": args.memory_type,
        }.items()
        if value is not None
    }
    if args.sync:
        from producers.sync_cli import sync

        return sync(args, defaults)
    if args.dry_run:
        raise InvalidInput("--dry-run goes with --sync")
    documents = read_documents(args.paths, defaults)
    client = EngramClient()
    report = load(client, documents, args)
    if args.json:
        _print_json(report)
    return 1 if report["failed"] else 0


def load(client: EngramClient, documents: Sequence[DocumentIn], args: argparse.Namespace) -> dict[str, Any]:
    """Enqueues the documents (but those stored unchanged) and, unless --no-wait, shows progress
    until they are finished; returns the figures (``--json`` prints them)."""
    out = sys.stderr if args.json else sys.stdout
    started = time.monotonic()
    accepted = client.ingest(documents, batch_documents=args.batch, force=args.force)
    unchanged = set(accepted.unchanged)
    enqueued = [d for d in documents if d.document_id not in unchanged]
    said = f"; {len(unchanged)} unchanged (stored as given; --force redoes them)" if unchanged else ""
    print(f"enqueued {len(enqueued)} documents in {len(accepted.task_ids)} tasks{said}", file=out)
    keys = [document_key(d.user_id, d.document_id) for d in enqueued]
    refs = [(key, accepted.version) for key in keys]
    report: dict[str, Any] = {
        "documents": len(documents),
        "enqueued": len(enqueued),
        "unchanged": accepted.unchanged,
        "version": accepted.version,
        "failed": 0,
    }
    if args.no_wait:
        return report
    failed = _wait_for(client, refs, started, args.timeout, out) if refs else 0
    elapsed = time.monotonic() - started
    chunks = client.chunk_count(keys) if keys else 0
    reused, embedded = client.chunk_work(refs) if refs else (0, 0)
    print(
        f"ingested {len(keys) - failed} documents, {chunks} chunks in {elapsed:.1f} s "
        f"({chunks / elapsed:.1f} chunks/s); chunks embedded {embedded}, reused {reused}; "
        f"unchanged: {len(unchanged)}; failed: {failed}",
        file=out,
    )
    report.update(
        failed=failed, chunks=chunks, chunks_embedded=embedded, chunks_reused=reused, seconds=elapsed
    )
    return report


def _wait_for(
    client: EngramClient, keys: list[DocRef], started: float, timeout: float, out: TextIO = sys.stdout
) -> int:
    """Shows progress until every document is done or failed at the version this load gave it
    (or a newer one); returns how many failed."""
    interactive = out.isatty()
    last_line = ""
    progress = LoadProgress(keys)
    while True:
        states = progress.poll(client)
        finished = progress.finished
        elapsed = time.monotonic() - started
        line = (
            f"  {finished}/{len(keys)} documents finished ({states['failed']} failed); "
            f"queued {states['queued']}, chunking {states['chunking']}, embedding {states['embedding']}, "
            f"writing {states['writing']}; {elapsed:.0f} s"
        )
        if interactive:
            print("\r" + line, end="", flush=True, file=out)
        elif line != last_line and (finished == len(keys) or int(elapsed) % 5 == 0):
            print(line, flush=True, file=out)
        last_line = line
        if finished == len(keys):
            if interactive:
                print(file=out)
            return states["failed"]
        if elapsed > timeout:
            raise SearchTimeout(f"ingestion not finished after {timeout:g} s: {dict(states)}")
        time.sleep(progress.pause())


def _search(args: argparse.Namespace) -> int:
    request = SearchRequest(
        query=args.query,
        user_id=args.user_id,
        top_k=args.top_k,
        threshold=args.threshold,
        filters=SearchFilters(
            project_id=args.project_id,
            session_id=args.session_id,
            memory_types=args.memory_types,
            tags=args.tags,
        ),
    )
    response = EngramClient().search(request, timeout_s=args.timeout)
    if args.json:
        print(response.model_dump_json(indent=2))
        return 0
    print(
        f"{response.count} results for {response.query!r} "
        f"(embedding {response.embedding_time_ms:.1f} ms, search {response.search_time_ms:.1f} ms, "
        f"from {response.source})"
    )
    for rank, result in enumerate(response.results, start=1):
        snippet = " ".join(result.content.split())[:160]
        print(
            f"{rank:>3}. similarity {result.similarity_score:.3f}  score {result.score:.3f}  "
            f"[{result.document_id}#{result.chunk_index}] {snippet}"
        )
    return 0


def _status(args: argparse.Namespace) -> int:
    client = EngramClient()
    if args.document_id:
        if not args.user_id:
            raise InvalidInput("a document's status needs --user")
        status = client.status(args.user_id, args.document_id)
        print(status.model_dump_json(indent=2))
        return 0 if status.state != "unknown" else 1
    overview = client.overview()
    _print_json(overview)
    stores = overview["stores"]
    points, counted = stores["qdrant_points"], stores["qdrant_points_counted_at"]
    qdrant = (
        "not counted yet (embedded: each reconcile pass counts them)"
        if points is None
        else f"{points} points"
    )
    print(
        f"Neo4j: {stores['neo4j_memories']} memories; Qdrant: {qdrant}"
        + ("" if counted is None else f" (counted {counted})"),
        file=sys.stderr,
    )
    if stores["primary_lost"]:
        print(f"engram: {stores['primary_lost']}", file=sys.stderr)
        return 1
    return 0


def _filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-type", action="append", dest="memory_types")
    parser.add_argument("--tag", action="append", dest="tags")


def _filters(args: argparse.Namespace) -> SearchFilters:
    return SearchFilters(
        project_id=args.project_id,
        session_id=args.session_id,
        document_id=getattr(args, "document_id", None),
        memory_types=args.memory_types,
        tags=args.tags,
    )


def _forget(args: argparse.Namespace) -> int:
    client = EngramClient()
    results: list[tuple[str, DeleteResult]] = []
    for document_id in args.document_ids:
        results.append((f"document {document_id}", client.delete_document(args.user_id, document_id)))
    for memory_id in args.memory_ids or []:
        results.append((f"memory {memory_id}", client.delete_memory(args.user_id, memory_id)))
    filters = _filters(args)
    if args.all or filters != SearchFilters():
        results.append(("matching memories", client.delete_where(args.user_id, filters, everything=args.all)))
    if not results:
        raise InvalidInput("name documents, --memory-id, filters, or --all")
    for what, result in results:
        where = "both stores" if result.qdrant_confirmed else "Neo4j; Qdrant left to the reconciler"
        gone = f"{result.memories} memories deleted from {where}" if result.memories else "nothing found"
        print(f"{what}: {gone}")
    return 1 if any(result.memories == 0 for _, result in results) else 0


def _replay(args: argparse.Namespace) -> int:
    report = EngramClient().replay(args.user_id, args.document_ids)
    print(f"re-driven: {report.write} to the write stage, {report.embed} to the embed stage")
    if report.not_staged:
        print(f"{len(report.not_staged)} failed documents have nothing staged: post them again")
    return 1 if report.not_staged else 0


def _list(args: argparse.Namespace) -> int:
    page = EngramClient().list_memories(args.user_id, _filters(args), args.limit, args.cursor)
    if args.json:
        print(page.model_dump_json(indent=2))
        return 0
    for memory in page.memories:
        snippet = " ".join(memory.content.split())[:100]
        where = f"[{memory.document_id}#{memory.chunk_index}] v{memory.version} {memory.vector_sync}"
        print(f"{memory.id}  {where}  {snippet}")
    print(f"next cursor: {page.next_cursor}" if page.next_cursor else f"{len(page.memories)} memories; end")
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    client = EngramClient()
    report = client.reconcile(
        dry_run=args.dry_run, timeout_s=None if args.no_wait else 600.0, force=args.force
    )
    _print_json(report)
    refused = report.get("primary_lost") or report.get("mass_delete_refused")
    if refused:
        print(f"engram: reconcile deleted no orphan point: {refused}", file=sys.stderr)
    return 0 if not report.get("error") and not refused else 1


def _reembed(args: argparse.Namespace) -> int:
    client = EngramClient()
    if args.status:
        progress = client.reembed_progress()
        if progress is None:
            print("no model migration has run")
            return 0
        _print_json(_progress_json(progress))
        return 0
    if args.drop_old:
        model, dimension = client.reembed_drop_old()
        print(f"dropped the Qdrant collection of {model} ({dimension} dimensions)")
        return 0
    if args.no_wait:
        migration, pages = client.reembed_start(args.page)
        print(f"migration to {migration.target.model} (run {migration.run}): enqueued {pages} pages")
        return 0
    interactive = sys.stdout.isatty()
    started = time.monotonic()
    last = [""]

    def show(progress: ReembedProgress) -> None:
        m = progress.migration
        line = (
            f"  {m.phase}: {progress.done}/{progress.total} memories re-embedded with {m.target.model}; "
            f"run {m.run}: {m.run_pages} pages, {m.run_reembedded} memories; "
            f"{time.monotonic() - started:.0f} s"
        )
        if interactive:
            print("\r" + line, end="", flush=True)
        elif line.split(";")[0] != last[0].split(";")[0]:
            print(line, flush=True)
        last[0] = line

    migration = client.reembed(show, timeout_s=args.timeout, page_size=args.page)
    if interactive:
        print()
    print(
        f"switched to {migration.target.model} ({migration.target.dimension} dimensions): "
        f"{migration.reembedded} memories re-embedded in {migration.pages} pages. Restart every worker "
        f"with this model; `engram reembed --drop-old` drops the collection of {migration.source[0]}"
    )
    return 0


def _progress_json(progress: ReembedProgress) -> dict[str, Any]:
    m = progress.migration
    return {
        "from": {"model": m.source[0], "dimension": m.source[1]},
        "to": {"model": m.target.model, "dimension": m.target.dimension, "backend": m.target.backend},
        "state": m.phase,
        "memories": progress.total,
        "done": progress.done,
        "run": m.run,
        "pages": m.pages,
        "reembedded": m.reembedded,
        "run_pages": m.run_pages,
        "run_reembedded": m.run_reembedded,
        "started_at": m.started_at,
        "switched_at": m.switched_at,
        "old_collection_dropped_at": m.old_dropped_at,
    }


def _keys_create(args: argparse.Namespace) -> int:
    tenant = None if args.admin else _identifier(args.tenant)
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


def _identifier(value: str, option: str = "--tenant") -> str:
    """A tenant named on the command line, checked as the API checks it."""
    try:
        return TypeAdapter(Identifier).validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(f"{option} {value!r}: {exc.errors()[0]['msg']}") from exc


def _eval(args: argparse.Namespace) -> int:
    from producers.evaluate import main as evaluate

    if (args.dataset is None) == (args.suite is None):
        raise InvalidInput("engram eval takes one DATASET or --suite DIR")
    if args.suite is not None:
        return evaluate(args.suite, args.reuse, args.json, suite=True)
    return evaluate(args.dataset, args.reuse, args.json)


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
    # subclass closes a connection whose headers come too slowly (producers/slow_clients.py) and
    # caps connections per client and in all (producers/connections.py).
    uvicorn.run(
        "producers.api:app",
        http="producers.connections:GatedHttpToolsProtocol",
        # The connections are capped by the protocol (per client, idle ones closed first); uvicorn's
        # own bound, a 503 to every request past it, only backs it up (producers/connections.py).
        limit_concurrency=2 * settings.api_max_connections,
        timeout_keep_alive=settings.api_keep_alive_s,
        log_config=log_config,
        host=host,
        port=args.port or settings.api_port,
        workers=args.workers or settings.api_workers,
    )
    return 0


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


if __name__ == "__main__":
    raise SystemExit(main())
