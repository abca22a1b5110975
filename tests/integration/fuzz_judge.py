"""Which of schemathesis's "schema-violating request accepted" failures were no violation as the
request went over the wire, judged by what was sent: the API fuzz run (test_fuzz_api.py) leaves
those out, and test_fuzz_findings.py checks the judgement. A helper module, so no test module
imports another."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import TypeAdapter, ValidationError
from schemathesis.core.failures import AcceptedNegativeData, Failure

from shared.models import Identifier

# What a "schema-violating request accepted" holds when the violation never reached the app as
# one: a query string has no types (tag=false is the tag "false"; a one-item array is one value),
# the Authorization header sent is the caller's, not the drawn one, an unknown query parameter is
# ignored, and a drawn "format" violation of a format the app defines itself (identifier,
# readable-text, date-time) is judged by the app's own validator, whose rules the property tests
# check against docs/reference/http-api.md.
_ON_THE_WIRE_VALID = (
    "was null, became",
    "violates `format`",
    "/properties/Authorization",
    "query: violates `additionalProperties`",
    "violates `required` at /anyOf/",
)


def not_a_violation_as_sent(case: Any, response: Any, failure: Failure) -> bool:
    if not isinstance(failure, AcceptedNegativeData):
        return False
    parts = [line.strip() for line in failure.message.splitlines() if line.strip().startswith("- ")]
    if parts and all(any(mark in part for mark in _ON_THE_WIRE_VALID) for part in parts):
        return True
    # A query parameter drawn as a boolean, a number, null or a list of them, or as text the
    # generator took for a violation (user_id=ô is a valid tenant): on the wire it is text like
    # any other. Judged by what was sent: each value a valid identifier (memory_type=false is the
    # memory type "false"; a single-valued parameter sent twice is refused by the app), and only
    # query parameters named as the violation. One drawn as an empty array is not sent at all
    # (memory_type=true&project_id=[] sends memory_type alone): absent, as an optional one may be.
    # "parameter `tag` in query", or several at once: "parameters `tag`, `session_id` in query"
    # Or, one line a component: "- query: violates `anyOf` at /properties/user_id". Lines the
    # wire makes valid (the caller's Authorization header, say) need no name.
    listed = re.search(r"parameters? ((?:`[^`]+`(?:, )?)+) in query", failure.message)
    names = re.findall(r"`([^`]+)`", listed.group(1)) if listed else []
    names += re.findall(r"- query: violates `[^`]+` at /properties/([^/\s]+)", failure.message)
    judged = [part for part in parts if not any(mark in part for mark in _ON_THE_WIRE_VALID)]
    if judged and not all(any(_about(part, name) for name in names) for part in judged):
        return False
    sent = parse_qs(urlsplit(str(response.request.url)).query, keep_blank_values=True)
    return bool(names) and all(
        all(map(_identifier, sent[name])) if sent.get(name) else not _required(case, name) for name in names
    )


def _required(case: Any, name: str) -> bool:
    """Whether the operation requires the query parameter ``name``."""
    return any(parameter.name == name and parameter.is_required for parameter in case.operation.query)


def _about(part: str, name: str) -> bool:
    """Whether a line of a failure speaks of the parameter ``name``."""
    return f"`{name}`" in part or re.search(rf"/properties/{re.escape(name)}(/|\s|$)", part) is not None


def _identifier(value: str) -> bool:
    try:
        TypeAdapter(Identifier).validate_python(value)
    except ValidationError:
        return False
    return True
