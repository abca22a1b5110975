"""Every setting of Engram, read once from ``ENGRAM_*`` variables and ``.env``.

No other module reads the environment: they call :func:`get_settings`. Every default is safe for
local use; placeholder secrets are refused when ``ENGRAM_ENV=production``.

``Settings`` is one flat class, so every variable keeps its flat name (``ENGRAM_SEARCH_RRF_K``)
and every caller reads ``settings.search_rrf_k``; its fields are written in five groups, one module
each, with the checks of their own fields beside them:

- ``stores.py``: the data folder, Redis, Neo4j, Qdrant, and their secrets;
- ``pipeline.py``: embedding, chunking, the tasks' limits and retries, the graph's entities;
- ``search.py``: how a search runs and ranks;
- ``http.py``: the HTTP app, API keys, tenants' limits, the status page;
- ``operations.py``: model migration, reconciler, restore, logs and metrics.

The groups are listed last to first below: pydantic takes the fields of the last base first, so
the settings table (``ops/settings_table.py``) reads in the order of the list above.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.settings.http import HttpSettings, is_loopback
from shared.settings.operations import OperationsSettings
from shared.settings.pipeline import EmbeddingBackend, PipelineSettings, user_cache
from shared.settings.search import SearchSettings
from shared.settings.stores import DEV_NEO4J_PASSWORD, StoreSettings


class Settings(
    OperationsSettings, HttpSettings, SearchSettings, PipelineSettings, StoreSettings, BaseSettings
):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    @model_validator(mode="after")
    def _check(self) -> Settings:
        """What spans the groups, after each group's own checks: production's refusals."""
        if self.env == "production":
            self._check_production_secrets()
        return self

    @property
    def metrics_path(self) -> Path:
        return self.metrics_dir or self.data_dir / "metrics"

    @property
    def local_model_cache_path(self) -> Path:
        return self.local_model_cache or user_cache() / "models"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


__all__ = [
    "DEV_NEO4J_PASSWORD",
    "EmbeddingBackend",
    "HttpSettings",
    "OperationsSettings",
    "PipelineSettings",
    "SearchSettings",
    "Settings",
    "StoreSettings",
    "get_settings",
    "is_loopback",
]
