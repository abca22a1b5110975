"""An n8n item's ``pairedItem`` is n8n's own ``IPairedItemData``, with its ``sourceOverwrite`` as
n8n's ``ISourceData`` (``{previousNode: string, previousNodeOutput?: number, previousNodeRun?:
number}``): every shape n8n sends is taken, any other is refused with the field named, and the
OpenAPI document says so (the fuzzer draws its cases from it)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from producers.http.n8n_items import N8nItem

DOCUMENT = {"id": "d", "text": "A perfectly fine sentence."}


def item(paired: Any) -> dict[str, Any]:
    return {"json": DOCUMENT, "pairedItem": paired}


@pytest.mark.parametrize(
    "paired",
    [
        0,
        {"item": 0},
        {"item": 1, "input": 0},
        [{"item": 0}, {"item": 0, "input": 1}],
        {"item": 2, "sourceOverwrite": {"previousNode": "Loop Over Items"}},
        {
            "item": 0,
            "input": 1,
            "sourceOverwrite": {"previousNode": "Merge", "previousNodeOutput": 1, "previousNodeRun": 3},
        },
        [{"item": 0, "sourceOverwrite": {"previousNode": "If", "previousNodeOutput": 0.0}}],
    ],
)
def test_every_shape_n8n_sends_is_taken(paired: Any) -> None:
    assert N8nItem.model_validate(item(paired)).document.id == "d"


@pytest.mark.parametrize(
    "source",
    [
        # the full fuzz run: {"k": false} was taken (read as {"k": 0}) and the request queued
        {"k": False},
        {"previousNode": "Merge", "k": 1},
        {},
        {"previousNode": 3},
        {"previousNode": None},
        {"previousNode": "Merge", "previousNodeOutput": True},
        {"previousNode": "Merge", "previousNodeOutput": "1"},
        {"previousNode": "Merge", "previousNodeRun": -1},
        {"previousNode": "Merge", "previousNodeRun": 0.5},
        "Merge",
        [{"previousNode": "Merge"}],
    ],
)
def test_a_source_not_of_n8ns_shape_is_refused_with_the_field_named(source: Any) -> None:
    for paired in ({"item": 0, "sourceOverwrite": source}, [{"item": 0, "sourceOverwrite": source}]):
        with pytest.raises(ValidationError) as exc:
            N8nItem.model_validate(item(paired))
        # (pairedItem's other shapes, a number and a list, are named beside it as not matched)
        places = [".".join(map(str, error["loc"])) for error in exc.value.errors()]
        assert any("sourceOverwrite" in place for place in places), places


def test_the_openapi_document_describes_the_source_as_n8n_does() -> None:
    from producers.http.app import app

    schemas = app.openapi()["components"]["schemas"]
    overwrite = schemas["PairedItem"]["properties"]["sourceOverwrite"]
    assert {"$ref": "#/components/schemas/SourceData"} in overwrite["anyOf"]
    source = schemas["SourceData"]
    assert source["additionalProperties"] is False
    assert source["required"] == ["previousNode"]
    assert set(source["properties"]) == {"previousNode", "previousNodeOutput", "previousNodeRun"}
    assert source["properties"]["previousNode"] == {
        "type": "string",
        "maxLength": 1024,
        "title": "Previousnode",
    }
    for number in ("previousNodeOutput", "previousNodeRun"):
        assert {"type": "integer", "minimum": 0, "maximum": 2**32 - 2} in source["properties"][number][
            "anyOf"
        ]


def test_every_n8n_field_is_bounded() -> None:
    # (issue 25: a 20 MB pairedItem.sourceOverwrite.previousNode was queued with a 202)
    from producers.http.n8n_items import ITEM_NUMBER_MAX, NODE_NAME_MAX

    longest = {"item": ITEM_NUMBER_MAX, "sourceOverwrite": {"previousNode": "n" * NODE_NAME_MAX}}
    assert N8nItem.model_validate(item(longest)).document.id == "d"
    too_long = {"previousNode": "n" * (NODE_NAME_MAX + 1)}
    for paired in (
        {"item": 0, "sourceOverwrite": too_long},
        [{"item": 0, "sourceOverwrite": too_long}],
        ITEM_NUMBER_MAX + 1,
        {"item": ITEM_NUMBER_MAX + 1},
        {"item": 0, "input": ITEM_NUMBER_MAX + 1},
        {"item": 0, "sourceOverwrite": {"previousNode": "If", "previousNodeOutput": 10**400}},
        {"item": 0, "sourceOverwrite": {"previousNode": "If", "previousNodeRun": 1e300}},
    ):
        with pytest.raises(ValidationError) as exc:
            N8nItem.model_validate(item(paired))
        kinds = {error["type"] for error in exc.value.errors()}
        assert kinds & {"string_too_long", "less_than_equal", "int_parsing_size"}, (paired, kinds)
