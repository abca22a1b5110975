"""Keeping the stores in step and the stack observable: the model migration, the reconciler,
the restore, logs, metrics and Flower."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from shared.settings.stores import empty_secret_is_unset


class OperationsSettings(BaseModel):
    # Model migration (engram reembed).
    reembed_page_size: int = Field(
        128, ge=1, le=4096, description="Memories re-embedded per task of a model migration."
    )

    # Reconciler.
    reconcile_grace_s: int = Field(300, ge=0, description="Pending younger than this is left alone.")
    reconcile_batch_size: int = Field(256, ge=1, description="Memories re-synced per Qdrant call.")
    reconcile_scan_page: int = Field(
        1000, ge=10, description="Memories and points compared per range of the drift scan."
    )
    reconcile_scroll_page: int = Field(
        50_000,
        ge=10,
        description="Points read ahead per Qdrant scroll of the drift scan (embedded local mode sorts "
        "every point id on each scroll, whatever its size).",
    )
    reconcile_scan_budget: int = Field(
        20_000,
        ge=10,
        description="Memories, and points of each collection, a scheduled pass compares at most, going "
        "on from where the last one stopped (engram reconcile compares all).",
    )
    reconcile_interval_s: int = Field(300, ge=10, description="How often beat runs the reconciler.")
    reconcile_min_primary_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="The reconciler deletes no point while Neo4j holds fewer Memories than this share "
        "of Qdrant's points (a wiped or new primary): it reports primary_lost.",
    )
    reconcile_max_delete_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Deleting more than this share of a collection's points at once (in a pass, or in a "
        "round of the scheduled sweep, judged on the whole collection) needs --force.",
    )
    reconcile_mass_delete_min: int = Field(
        100,
        ge=0,
        description="Deletions of at most this many points in a pass or round are never a mass one.",
    )
    restore_batch_documents: int = Field(
        64, ge=1, le=4096, description="Documents rebuilt per write of engram restore."
    )
    restore_lock_ttl_s: float = Field(
        60.0,
        ge=1.0,
        le=3600.0,
        description="One restore at a time: its lock frees itself this long after its worker died.",
    )

    # Logs and metrics (shared/logging_setup.py, shared/metrics.py).
    log_format: Literal["json", "text"] | None = Field(
        None,
        description="json: a JSON object a line; text: for people. Unset: json for services, text for CLI.",
    )
    log_level: str = Field("INFO", description="Level of the app's and the CLI's logs (workers: --loglevel).")
    metrics_dir: Path | None = Field(
        None, description="prometheus-client's multiprocess files of every process; default data_dir/metrics."
    )
    flower_address: str = Field("127.0.0.1", description="Flower's address (python -m workers.flower).")
    flower_port: int = Field(5555, ge=1, le=65535, description="Flower's port.")
    flower_password: SecretStr | None = Field(
        None, description="Flower basic-auth password (user engram); unset: data_dir/secrets/flower.password."
    )
    metrics_cache_s: float = Field(
        10.0, ge=0, description="How long /metrics reuses the counts it read from Redis and Neo4j."
    )

    @field_validator("flower_password", mode="before")
    @classmethod
    def _empty_flower_password_is_unset(cls, value: object) -> object:
        return empty_secret_is_unset(value)
