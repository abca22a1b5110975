"""n8n's item shape, taken by ``POST /api/documents`` beside Engram's own.

An n8n workflow holds its data as items, ``{"json": {...}, "pairedItem": {"item": 0}}``. An HTTP
Request node set to run once and send ``{{ JSON.stringify($input.all()) }}`` posts every item of
its input in one request, in that shape: a JSON array of items. Each item's ``json`` is one
document, validated exactly as a document sent alone; ``pairedItem`` is n8n's own bookkeeping
(which input item this one came from) and is read past. Anything else in an item (``binary``
data, say) is refused with 422, as an unknown field of a document is: Engram takes text.

Every field of n8n's bookkeeping is bounded (a node's name, an item's number, the list of
items it came from): what Engram reads past must not cost more than what it takes (a 20 MB
``previousNode`` was queued with a 202); past a bound, 422 names the field and the limit.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from shared.models import DocumentBody, a_json_number

# The largest index of a JavaScript array: no item, input, output or run of n8n numbers more.
ITEM_NUMBER_MAX = 2**32 - 2
# Far past any node name n8n's editor shows.
NODE_NAME_MAX = 1024
# The inputs one item can name as its sources (a Merge node's).
PAIRED_ITEMS_MAX = 1000

# An item number as JSON Schema's integer has it (3.0 is 3), never a boolean or text.
ItemNumber = Annotated[int, Field(ge=0, le=ITEM_NUMBER_MAX), BeforeValidator(a_json_number)]
NodeName = Annotated[str, StringConstraints(max_length=NODE_NAME_MAX)]

ITEM_KEY = "json"


class SourceData(BaseModel):
    """n8n's ``ISourceData``: the node (its output, its run) an item is taken to come from, where
    n8n rewired its lineage (``{previousNode: string, previousNodeOutput?: number,
    previousNodeRun?: number}``, in n8n-workflow's interfaces)."""

    model_config = ConfigDict(extra="forbid")

    previousNode: NodeName
    previousNodeOutput: ItemNumber | None = None
    previousNodeRun: ItemNumber | None = None


class PairedItem(BaseModel):
    """n8n's ``IPairedItemData``: which item of which input an item came from."""

    model_config = ConfigDict(extra="forbid")

    item: ItemNumber
    input: ItemNumber | None = None
    sourceOverwrite: SourceData | None = None


class N8nItem(BaseModel):
    """One n8n item whose ``json`` is a document."""

    model_config = ConfigDict(extra="forbid")

    document: DocumentBody = Field(alias=ITEM_KEY, description="The document, as sent alone.")
    pairedItem: (
        ItemNumber | PairedItem | Annotated[list[PairedItem], Field(max_length=PAIRED_ITEMS_MAX)] | None
    ) = Field(None, description="n8n's bookkeeping; read past.")


def is_n8n_item(value: Any) -> bool:
    """A JSON object with a ``json`` key is an n8n item: no document has a field of that name."""
    return isinstance(value, dict) and ITEM_KEY in value
