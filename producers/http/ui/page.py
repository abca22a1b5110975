"""``/ui``: the status page, plain server-rendered HTML over the app's own services.

For an admin key: sync health and queue depths of the whole store (``routes.metrics.read_stores``,
what ``/metrics`` reads), the newest ingestions and the failures of every tenant or of the one
picked, with a replay button each; for a tenant key the same, scoped to its tenant (no queue
depths: those are the whole store's, as on ``/api/status``). A search box shows results with
their score explanations (the query queue, as ``POST /api/memory/semantic-search``), and the
tenant's entities link to an entity view.

Sign-in and its cookie: ``producers/http/ui/session.py``. Every POST (sign-in, sign-out, replay) must
come from this origin (``Origin``, else ``Referer``), and, signed in, carry the session's CSRF
token; the cookie is ``SameSite=Strict`` besides. Templates are Jinja2 with autoescaping on, so
ids, texts and reasons render as text. No script runs on the page: its CSP is ``default-src
'self'``. The routes are out of the OpenAPI document (``include_in_schema=False``).
"""

from __future__ import annotations

from functools import lru_cache, partial
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from producers.client import EngramClient
from producers.http.arrival import arrived
from producers.http.auth import address_of, failed_tries
from producers.http.deps import authenticator, client, search
from producers.http.routes.metrics import store_readings
from producers.http.ui.cache import StoreReadings
from producers.http.ui.session import COOKIE, COOKIE_PATH, Session, Sessions, SignOuts
from shared.auth import Authenticator, Caller
from shared.errors import EngramError, Forbidden, InvalidInput, TooManyFailures, Unauthenticated
from shared.failed_tries import key_id_of
from shared.graph.entities import normalise
from shared.models import Identifier, SearchRequest
from shared.redis_client import connect
from shared.settings import get_settings, is_loopback

router = APIRouter(prefix="/ui", include_in_schema=False)

_HERE = Path(__file__).with_name("templates")
templates = Jinja2Templates(env=jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE), autoescape=True))

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
SHOWN = 30  # rows of each table
TenantQuery = Annotated[Identifier | None, Query(max_length=200)]
SearchText = Annotated[str | None, Query(max_length=8192)]


def _client() -> EngramClient:
    return client()  # the app's one client, made on first use


def _authenticator() -> Authenticator:
    return authenticator()


@lru_cache(maxsize=1)
def sessions() -> Sessions:
    return Sessions.of(get_settings())


@lru_cache(maxsize=1)
def sign_outs() -> SignOuts:
    return SignOuts(connect(get_settings()))


def _local(request: Request) -> bool:
    """ENGRAM_AUTH_MODE=local, for a loopback client: no keys, every caller an admin."""
    client = request.client
    return get_settings().auth_mode == "local" and client is not None and is_loopback(client.host)


async def _signed_in(request: Request) -> Session | None:
    """The session of the request's cookie, while its key is still live."""
    session = sessions().read(request.cookies.get(COOKIE))
    if session is None:
        return None
    try:
        if await run_in_threadpool(sign_outs().ended, session):
            return None
    except EngramError:  # cannot tell whether it was signed out: it is not taken
        return None
    if session.key_id is None:  # a local-mode sign-in holds only while the mode is local
        return session if _local(request) else None
    try:
        live = await run_in_threadpool(_authenticator().live, session.key_id)
    except (Unauthenticated, EngramError):
        return None
    return session if live.tenant == session.tenant else None


def _same_origin(request: Request) -> bool:
    """The POST came from a page of this origin (the browser says so in Origin, else Referer)."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return False
    parts = urlsplit(sent)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form's fields (the first value of each); the body is bounded by BodyGuard."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return {}
    try:
        fields = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=20)
    except ValueError:  # more fields than any form of the page has: none is read
        return {}
    return {name: values[0] for name, values in fields.items()}


def _page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    response = templates.TemplateResponse(request, template, context, status_code=status)
    response.headers.update(SECURITY_HEADERS)
    return response


def _signin(request: Request, status: int = 200, message: str | None = None) -> Response:
    return _page(request, "signin.html", status, message=message, local=_local(request), session=None)


def _refused(request: Request, status: int, message: str, session: Session | None) -> Response:
    return _page(request, "problem.html", status, message=message, session=session)


async def _scoped(request: Request, tenant: str | None) -> tuple[Session, str | None] | Response:
    """The signed-in session and the tenant a page shows (a tenant key's own, whatever is asked),
    or the page to answer instead: the sign-in form, or a refusal of another tenant."""
    session = await _signed_in(request)
    if session is None:
        return _signin(request)
    if session.tenant is not None and tenant not in (None, session.tenant):
        return _refused(request, 403, "This key is not for that tenant.", session)
    return session, session.tenant or tenant


def _redirect(path: str, **params: str) -> Response:
    query = urlencode({k: v for k, v in params.items() if v})
    response = RedirectResponse(f"{path}?{query}" if query else path, status_code=303)
    response.headers.update(SECURITY_HEADERS)
    return response


@router.get("/status.css")
async def stylesheet() -> Response:
    return FileResponse(_HERE / "status.css", media_type="text/css", headers=SECURITY_HEADERS)


@router.post("/signin")
async def sign_in(request: Request) -> Response:
    """Takes the key once; answers with the session cookie, or the form again (401) and nothing else."""
    if not _same_origin(request):
        return _signin(request, 403, "Refused: the sign-in did not come from this page.")
    key = (await _form(request)).get("key", "").strip()
    if _local(request):
        session_of: tuple[str | None, str | None] = (None, None)
    else:
        try:
            check = partial(_authenticator().bearer, key)
            caller = await run_in_threadpool(
                failed_tries().check, address_of(request.scope), key_id_of(key), check
            )
        except TooManyFailures as exc:
            answer = _signin(request, 429, f"Too many failed sign-ins: retry in {exc.retry_after_s} s.")
            answer.headers["Retry-After"] = str(exc.retry_after_s)
            return answer
        except Unauthenticated:
            return _signin(request, 401, "That key is not a live Engram API key.")
        except EngramError as exc:
            return _signin(request, 503, f"Keys cannot be checked now: {exc}")
        session_of = (caller.key_id, caller.tenant)
    _, token = sessions().start(*session_of)
    response = _redirect(COOKIE_PATH)
    response.set_cookie(
        COOKIE,
        token,
        max_age=sessions().max_age_s,
        path=COOKIE_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/signout")
async def sign_out(request: Request) -> Response:
    session = await _signed_in(request)
    if session is not None and not (
        _same_origin(request) and session.csrf_matches((await _form(request)).get("csrf"))
    ):
        return _refused(request, 403, "Refused: the request did not come from this page.", session)
    if session is not None:
        try:
            await run_in_threadpool(sign_outs().end, session, sessions().max_age_s)
        except EngramError as exc:
            return _refused(request, 503, f"Cannot sign out now: {exc}", session)
    response = _redirect(COOKIE_PATH)
    response.delete_cookie(
        COOKIE, path=COOKIE_PATH, secure=request.url.scheme == "https", httponly=True, samesite="strict"
    )
    return response


@router.get("")
async def status(request: Request, tenant: TenantQuery = None, q: SearchText = None) -> Response:
    signed = await _scoped(request, tenant)
    if isinstance(signed, Response):
        return signed
    session, scope = signed
    view = await run_in_threadpool(_gather, session, scope)
    if q:
        view["search"] = await _search(scope, q, request)
    notice = sessions().read_notice(request.query_params.get("notice"))
    return _page(request, "status.html", session=session, tenant=scope, q=q or "", notice=notice, **view)


@router.get("/entities/{name:path}")
async def entity(request: Request, name: str, tenant: TenantQuery = None) -> Response:
    signed = await _scoped(request, tenant)
    if isinstance(signed, Response):
        return signed
    session, scope = signed
    if scope is None:
        return _refused(request, 422, "Pick a tenant first: an entity belongs to one.", session)
    name = name[:200]
    try:
        # A name with no letter or digit ("---") names no entity (as on /api/entities).
        found = await run_in_threadpool(_client().get_entity, scope, name) if normalise(name) else None
    except EngramError as exc:
        return _refused(request, 503, f"Entities cannot be read now: {exc}", session)
    if found is None:
        return _refused(request, 404, f"No entity {name!r} for tenant {scope!r}.", session)
    return _page(request, "entity.html", session=session, tenant=scope, entity=found)


@router.post("/replay")
async def replay(request: Request) -> Response:
    """Re-drives one failed document: an admin's of any tenant, a tenant key's of its own only."""
    session = await _signed_in(request)
    if session is None:
        return _signin(request, 401, "Sign in first.")
    form = await _form(request)
    if not (_same_origin(request) and session.csrf_matches(form.get("csrf"))):
        return _refused(request, 403, "Refused: the request did not come from this page.", session)
    try:
        tenant = _caller(session).tenant_for(form.get("user_id") or None)
        report = await run_in_threadpool(_client().replay, tenant, [form.get("document_id", "")])
    except Forbidden as exc:
        return _refused(request, 403, str(exc), session)
    except InvalidInput as exc:
        return _refused(request, 422, str(exc), session)
    except EngramError as exc:
        return _refused(request, 503, f"Cannot replay now: {exc}", session)
    outcome = (
        "re-sent to the write stage"
        if report.write
        else "re-sent to the embed stage"
        if report.embed
        else "not replayed: its staged work has expired, ingest it again"
        if report.not_staged
        else "not replayed: it is no longer failed"
    )
    back = tenant if session.admin and form.get("back") == "tenant" else ""
    notice = sessions().notice(f"{form.get('document_id', '')}: {outcome}")
    return _redirect(COOKIE_PATH, tenant=back, notice=notice)


def _caller(session: Session) -> Caller:
    return Caller(key_id=session.key_id, tenant=session.tenant)


@lru_cache(maxsize=1)
def _store_readings() -> StoreReadings:
    return StoreReadings(get_settings().ui_cache_s)


def _gather(session: Session, tenant: str | None) -> dict[str, Any]:
    """What the page shows; each part read on its own, so a store down leaves the others. The
    store's readings are /metrics's (cached ENGRAM_METRICS_CACHE_S), a tenant's counts and
    entities cached ENGRAM_UI_CACHE_S; the newest ingestions and failures are Redis indexes."""
    view: dict[str, Any] = {"errors": {}}
    client = _client()
    cached = _store_readings()
    view["readings"] = store_readings() if session.admin else None
    parts: dict[str, Any] = {
        "overview": (lambda: cached.read(("overview", tenant), lambda: client.tenant_overview(tenant)))
        if tenant
        else None,
        "recent": lambda: client.recent_ingestions(tenant, SHOWN),
        "failures": lambda: client.failures(tenant, SHOWN),
        "entities": (
            lambda: cached.read(
                ("entities", tenant), lambda: client.list_entities(tenant, None, None, None, 20, 0).entities
            )
        )
        if tenant
        else None,
    }
    for name, read in parts.items():
        view[name] = None
        if read is None:
            continue
        try:
            view[name] = read()
        except EngramError as exc:
            view["errors"][name] = str(exc)
    return view


async def _search(tenant: str | None, text: str, request: Request) -> dict[str, Any]:
    if tenant is None:
        return {"error": "Pick a tenant to search: a search is always within one."}
    try:
        found = await search(SearchRequest(user_id=tenant, query=text), arrived(request))
    except ValidationError as exc:
        return {"error": "; ".join(str(e["msg"]) for e in exc.errors(include_url=False, include_input=False))}
    except EngramError as exc:
        return {"error": str(exc)}
    return {"response": found}
