"""The fault suite: real processes killed, services stopped, drift made by hand; parity checked after.

``ops/faults`` runs every scenario and prints a table; ``tests/faults/test_quick.py`` runs a fast
subset inside ``./ops/test``.
"""
