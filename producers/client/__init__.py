"""The client for apps: enqueue documents, search through the query queue, read status.

Everything a producer does goes through here, so the HTTP app, the CLI and an app embedding this
module enforce the same limits and speak to the queues the same way. ``EngramClient`` is made of
three parts: ``ingest`` (documents in, their progress, their deletion), ``reads`` (memories,
entities, searches, counts) and ``admin`` (keys, reconcile, restore, re-embed), over ``base`` (the
connections, from the composition root). ``waiting`` follows a load's progress.
"""

from __future__ import annotations

from producers.client.admin import Admin
from producers.client.base import batches, check_document, queue_errors
from producers.client.ingest import Ingest
from producers.client.reads import Reads

__all__ = ["EngramClient", "batches", "check_document", "queue_errors"]


class EngramClient(Ingest, Reads, Admin):
    """Engram through its queues and stores, as a producer sees it (blocking calls)."""
