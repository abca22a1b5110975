"""The screenshots the browser tests wrote this run, named in pytest's summary (conftest.py)."""

from __future__ import annotations

from pathlib import Path

SCREENSHOTS: list[Path] = []
