"""``engram bench``: the project's figures, measured in one run on corpora of real text.

It lives under ``producers/`` because it is a caller of the system, as the CLI and the SDK are:
it loads through ``EngramClient`` and the HTTP app, searches through the query queue, and reaches
the stores only through the composition root (``shared.container``), so it measures whichever
backends are configured. ``ops/`` is not installed with the package, and ``engram`` must find
this code from a fresh clone. One small module per measurement; ``run.py`` puts them in order.
"""
