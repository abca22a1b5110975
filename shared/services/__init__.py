"""The stage services: chunk, embed, write, sync, reconcile and the memory lifecycle.

Each is a class over small Protocols (``shared.stores.base``, staging, progress), built by the
composition root (``shared.container``); the Celery tasks in ``workers/`` are thin adapters over
them, and tests build them with in-memory fakes.
"""
