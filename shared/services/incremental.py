"""Which documents of a request need the pipeline: new, changed, or stored exactly as given.

A document is unchanged when the tenant's stored document of that id was written from the same
fields (``DocumentIn.fingerprint``: text, metadata, tags, title, source...), every chunk of it is
still there, embedded by the configured model, and no newer ingestion of it has been accepted
since (a newer one queued or failed means the stored one may not be what the caller last said, so
the work is done again). An unchanged document costs nothing: no task, no version, no write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from shared.models import DocumentIn
from shared.progress import ProgressRecord
from shared.stores.neo4j_incremental import StoredState

Change = Literal["new", "changed", "unchanged"]


def classify(
    document: DocumentIn, stored: StoredState | None, record: ProgressRecord | None, model: str
) -> Change:
    if stored is None:
        return "new"
    same = (
        stored.fingerprint == document.fingerprint()
        and stored.whole
        and stored.models == (model,)
        and (record is None or record.version <= stored.version)
    )
    return "unchanged" if same else "changed"


def classify_all(
    documents: Sequence[DocumentIn],
    keys: Sequence[str],
    stored: dict[str, StoredState],
    records: Sequence[ProgressRecord | None],
    model: str,
) -> list[Change]:
    return [
        classify(document, stored.get(key), record, model)
        for document, key, record in zip(documents, keys, records, strict=True)
    ]
