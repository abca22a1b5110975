"""A chat model: one system and one user message in, its text out (temperature 0)."""

from __future__ import annotations

from typing import Protocol


class ChatModel(Protocol):
    name: str

    def complete(self, system: str, user: str) -> str: ...

    def close(self) -> None: ...
