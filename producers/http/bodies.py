"""Request bodies parsed and validated off the event loop.

FastAPI validates a route's body parameter on the event loop: a body of the largest size whose
every document must be checked character by character (1,000 documents of 63 KB of white space
and one letter: about 10 s of pydantic) held every other request, ``/healthz`` too, for as long.
So the routes that take a body declare it as ``JsonBody(T)``, a dependency that reads the body
(``BodyGuard`` has already bounded and strictly checked it) and, when it is larger than
``INLINE_BYTES``, parses and validates it on a worker thread (``producers.http.threads``). The event
loop keeps answering meanwhile (the validators' Python code lets go of the GIL every few
milliseconds). A small body is validated in place: its cost is bounded, and a
thread would only delay it.

Invalid input is the same 422 as FastAPI's own (``loc`` from ``"body"``, the first errors, then a
count: the handler in ``producers.http.problems`` of ``RequestValidationError``), and the OpenAPI document
describes the body as before (``openapi_extra`` and ``add_body_schemas``).
"""

from __future__ import annotations

import email.message
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError

from producers.http.threads import INLINE_BYTES, off_the_loop
from producers.http.wire import PARSED_JSON, StrictJsonError, check_json

REF = "#/components/schemas/{model}"

# The models the bodies refer to, for the OpenAPI document's components.
_DEFINITIONS: dict[str, Any] = {}


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI would read a body of this type as JSON: application/json or +json."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


class JsonBody:
    """A dependency giving a route its body as ``T``, validated as described in the module."""

    def __init__(self, kind: Any, name: str) -> None:
        self.adapter: TypeAdapter[Any] = TypeAdapter(kind)
        schema = self.adapter.json_schema(ref_template=REF, mode="validation")
        for model, definition in schema.pop("$defs", {}).items():
            _DEFINITIONS.setdefault(model, definition)
        if isinstance(kind, type) and issubclass(kind, BaseModel):  # a model: by reference
            _DEFINITIONS.setdefault(kind.__name__, schema)
            schema = {"$ref": REF.format(model=kind.__name__)}
        else:
            schema.setdefault("title", name)
        self.openapi_extra: dict[str, Any] = {
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}
        }

    async def __call__(self, request: Request) -> Any:
        raw = await request.body()
        if not raw:
            missing = {"loc": ("body",), "msg": "Field required", "type": "missing"}
            raise RequestValidationError([missing])
        value: Any = raw  # a body not of a JSON type is validated as its bytes, as FastAPI does
        if _is_json(request.headers.get("content-type")):
            checked = request.scope.get(PARSED_JSON)
            if checked is not None and checked[0] == raw:  # BodyGuard parsed this body already
                value = checked[1]
            elif len(raw) > INLINE_BYTES:
                value = await off_the_loop(_parse, raw)
            else:
                value = _parse(raw)
        if len(raw) > INLINE_BYTES:
            return await off_the_loop(self.validate, value)
        return self.validate(value)

    def validate(self, value: Any) -> Any:
        """``value`` as ``T``, or ``RequestValidationError`` with every error (made here, on the
        thread: a count of them is cheap later, a million dicts are not)."""
        try:
            return self.adapter.validate_python(value, from_attributes=True)  # as FastAPI does
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            raise RequestValidationError(
                [{**error, "loc": ("body", *error["loc"])} for error in errors]
            ) from None


def _parse(raw: bytes) -> Any:
    try:
        return check_json(raw)
    except StrictJsonError as exc:
        raise RequestValidationError([{"loc": ("body",), "msg": str(exc), "type": "json"}]) from None


def add_body_schemas(app: FastAPI) -> None:
    """Puts the models the ``JsonBody`` bodies refer to among the OpenAPI document's components
    (a model FastAPI already describes keeps FastAPI's description)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in sorted(_DEFINITIONS.items()):
                schemas.setdefault(name, definition)
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]
