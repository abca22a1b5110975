"""Settings: safe defaults, ENGRAM_* variables, and the validators that refuse unworkable values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from shared.errors import ConfigurationError
from shared.settings import (
    DEV_NEO4J_PASSWORD,
    HttpSettings,
    OperationsSettings,
    PipelineSettings,
    SearchSettings,
    Settings,
    StoreSettings,
)


@pytest.fixture(autouse=True)
def _no_engram_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The tests see only the variables they set themselves, and no data folder of a demo (the
    default data_dir is relative to the working folder)."""
    for name in list(os.environ):
        if name.upper().startswith("ENGRAM_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_defaults_are_safe_for_local_use() -> None:
    settings = _settings()

    assert settings.env == "development"
    assert settings.embedding_backend == "local"
    assert settings.embedding_url is None
    assert settings.neo4j_password.get_secret_value() == DEV_NEO4J_PASSWORD
    assert settings.chunk_size_tokens + 2 <= settings.embedding_max_tokens
    assert settings.chunk_overlap_tokens < settings.chunk_size_tokens
    assert settings.task_soft_time_limit_s < settings.task_time_limit_s < settings.visibility_timeout_s
    assert settings.api_host == "127.0.0.1"


def test_secrets_are_not_shown_in_repr(tmp_path: Path) -> None:
    # Given every secret set, the Redis password read from the data folder
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "redis.password").write_text("redis-from-file\n")
    settings = _settings(
        data_dir=tmp_path,
        neo4j_password="s3cret-value",
        qdrant_api_key="qdrant-key-value",
        embedding_api_key="embedding-key-value",
    )

    # Then no way of showing the settings shows one
    shown = [repr(settings), str(settings), str(settings.model_dump()), settings.model_dump_json()]
    for secret in ("s3cret-value", "redis-from-file", "qdrant-key-value", "embedding-key-value"):
        assert not any(secret in text for text in shown), secret
    assert settings.redis_password is not None
    assert settings.redis_password.get_secret_value() == "redis-from-file"


def test_qdrant_local_path_defaults_under_data_dir() -> None:
    assert _settings(data_dir=Path("/srv/engram")).qdrant_local_path == Path("/srv/engram/qdrant")
    assert _settings(qdrant_path=Path("/q")).qdrant_local_path == Path("/q")


def test_chunk_exactly_filling_the_model_is_accepted() -> None:
    settings = _settings(chunk_size_tokens=254, embedding_max_tokens=256)

    assert settings.chunk_size_tokens == 254


def test_chunk_that_leaves_no_room_for_special_tokens_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="CHUNK_SIZE_TOKENS"):
        _settings(chunk_size_tokens=255, embedding_max_tokens=256)


def test_chunk_larger_than_a_smaller_model_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        _settings(embedding_max_tokens=128)  # the default chunk of 240 cannot fit


@pytest.mark.parametrize("overlap", [100, 150])
def test_overlap_not_below_chunk_size_is_refused(overlap: int) -> None:
    with pytest.raises(ConfigurationError, match="OVERLAP"):
        _settings(chunk_size_tokens=100, chunk_overlap_tokens=overlap)


def test_default_task_limits() -> None:
    settings = _settings()

    assert settings.task_soft_time_limit_s == 35
    assert settings.task_time_limit_s == 45
    assert settings.visibility_timeout_s == 75
    assert settings.task_retry_backoff_max_s == 25
    assert settings.visibility_timeout_s > settings.task_time_limit_s + settings.task_retry_backoff_max_s


@pytest.mark.parametrize("visibility", [1800, 1000])
def test_time_limit_not_below_visibility_timeout_is_refused(visibility: int) -> None:
    with pytest.raises(ConfigurationError, match="VISIBILITY_TIMEOUT"):
        _settings(task_time_limit_s=1800, task_soft_time_limit_s=1000, visibility_timeout_s=visibility)


@pytest.mark.parametrize("visibility", [70, 69])
def test_visibility_timeout_not_above_time_limit_plus_backoff_max_is_refused(visibility: int) -> None:
    # 45 s time limit + 25 s longest retry wait = 70: a visibility of 70 or less redelivers
    with pytest.raises(ConfigurationError, match="VISIBILITY_TIMEOUT"):
        _settings(visibility_timeout_s=visibility)


def test_visibility_timeout_just_above_time_limit_plus_backoff_max_is_accepted() -> None:
    settings = _settings(visibility_timeout_s=71)

    assert settings.visibility_timeout_s == 71


def test_a_longer_backoff_needs_a_longer_visibility_timeout() -> None:
    with pytest.raises(ConfigurationError, match="BACKOFF_MAX"):
        _settings(task_retry_backoff_max_s=40)

    assert _settings(task_retry_backoff_max_s=40, visibility_timeout_s=86).task_retry_backoff_max_s == 40


@pytest.mark.parametrize("soft", [600, 900])
def test_soft_time_limit_not_below_hard_limit_is_refused(soft: int) -> None:
    with pytest.raises(ConfigurationError, match="SOFT_TIME_LIMIT"):
        _settings(task_time_limit_s=600, task_soft_time_limit_s=soft, visibility_timeout_s=1000)


@pytest.mark.parametrize("backend", ["tei", "ollama", "openai"])
def test_http_backend_without_url_is_refused(backend: str) -> None:
    with pytest.raises(ConfigurationError, match="EMBEDDING_URL"):
        _settings(embedding_backend=backend)


def test_http_backend_with_url_is_accepted() -> None:
    settings = _settings(embedding_backend="tei", embedding_url="http://127.0.0.1:8080")

    assert settings.embedding_backend == "tei"


def test_production_with_the_development_password_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="NEO4J_PASSWORD"):
        _settings(env="production", redis_password="redis-secret")
    with pytest.raises(ConfigurationError):
        _settings(env="production", neo4j_password=DEV_NEO4J_PASSWORD, redis_password="redis-secret")


def test_production_with_another_password_is_accepted() -> None:
    settings = _settings(env="production", neo4j_password="a-real-secret", redis_password="redis-secret")

    assert settings.env == "production"
    assert settings.neo4j_password.get_secret_value() == "a-real-secret"


# The Redis password and the Qdrant API key.


def _write_password_file(data_dir: Path, text: str) -> None:
    (data_dir / "secrets").mkdir(parents=True)
    (data_dir / "secrets" / "redis.password").write_text(text)


def test_redis_password_is_read_from_the_data_folder_when_unset(tmp_path: Path) -> None:
    # Given the secret ops/ keeps in the data folder, and no ENGRAM_REDIS_PASSWORD
    _write_password_file(tmp_path, "from-the-file\n")

    # When settings are built
    settings = _settings(data_dir=tmp_path)

    # Then they hold it, without its newline
    assert settings.redis_password_file == tmp_path / "secrets" / "redis.password"
    assert settings.redis_password is not None
    assert settings.redis_password.get_secret_value() == "from-the-file"


def test_the_redis_password_variable_wins_over_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write_password_file(tmp_path, "from-the-file")
    monkeypatch.setenv("ENGRAM_REDIS_PASSWORD", "from-the-variable")

    settings = _settings(data_dir=tmp_path)

    assert settings.redis_password is not None
    assert settings.redis_password.get_secret_value() == "from-the-variable"


@pytest.mark.parametrize("variable", [None, ""])
def test_no_variable_and_no_file_is_no_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str | None
) -> None:
    if variable is not None:
        monkeypatch.setenv("ENGRAM_REDIS_PASSWORD", variable)  # empty: unset, not an empty password

    assert _settings(data_dir=tmp_path).redis_password is None


def test_an_empty_password_file_is_refused_naming_it(tmp_path: Path) -> None:
    _write_password_file(tmp_path, "\n")

    with pytest.raises(ConfigurationError, match=r"redis\.password is empty"):
        _settings(data_dir=tmp_path)


def test_a_redis_url_holding_a_password_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_REDIS_PASSWORD") as refused:
        _settings(redis_url="redis://:hunter2-in-url@cache.internal:6379/0")

    assert "hunter2-in-url" not in str(refused.value)


def test_a_redis_url_with_a_user_and_no_password_is_accepted() -> None:
    assert _settings(redis_url="redis://engram@cache.internal:6379/0").redis_url.startswith("redis://engram@")


def test_production_without_a_redis_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_REDIS_PASSWORD"):
        _settings(env="production", neo4j_password="a-real-secret", data_dir=tmp_path)


def test_production_accepts_the_redis_password_of_the_data_folder(tmp_path: Path) -> None:
    _write_password_file(tmp_path, "from-the-file")

    settings = _settings(env="production", neo4j_password="a-real-secret", data_dir=tmp_path)

    assert settings.redis_password is not None


def test_production_with_a_qdrant_server_and_no_api_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_QDRANT_API_KEY"):
        _settings(
            env="production",
            neo4j_password="a-real-secret",
            redis_password="redis-secret",
            qdrant_url="http://qdrant:6333",
        )


def test_production_with_a_qdrant_server_and_its_api_key_is_accepted() -> None:
    settings = _settings(
        env="production",
        neo4j_password="a-real-secret",
        redis_password="redis-secret",
        qdrant_url="http://qdrant:6333",
        qdrant_api_key="qdrant-key",
    )

    assert settings.qdrant_api_key is not None


def test_production_with_embedded_qdrant_needs_no_api_key() -> None:
    # A folder has no network surface: nothing to authenticate to
    settings = _settings(env="production", neo4j_password="a-real-secret", redis_password="redis-secret")

    assert settings.qdrant_url is None and settings.qdrant_api_key is None


def test_values_are_read_from_engram_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given ENGRAM_* variables in the environment
    monkeypatch.setenv("ENGRAM_CHUNK_SIZE_TOKENS", "120")
    monkeypatch.setenv("ENGRAM_CHUNK_OVERLAP_TOKENS", "10")
    monkeypatch.setenv("ENGRAM_REDIS_URL", "redis://cache.internal:6380/2")
    monkeypatch.setenv("ENGRAM_SEARCH_MEMORY_TYPE_WEIGHTS", '{"fact": 0.05}')
    monkeypatch.setenv("CHUNK_SIZE_TOKENS", "17")  # no prefix: not ours

    # When settings are built
    settings = _settings()

    # Then they hold the environment's values
    assert settings.chunk_size_tokens == 120
    assert settings.chunk_overlap_tokens == 10
    assert settings.redis_url == "redis://cache.internal:6380/2"
    assert settings.search_memory_type_weights == {"fact": 0.05}


def test_variables_are_validated_like_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_ENV", "production")
    monkeypatch.setenv("ENGRAM_REDIS_PASSWORD", "redis-secret")

    with pytest.raises(ConfigurationError):
        _settings()

    monkeypatch.setenv("ENGRAM_NEO4J_PASSWORD", "another-password")
    assert _settings().env == "production"


def test_env_file_is_read_when_given(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("ENGRAM_API_PORT=9001\nENGRAM_EMBEDDING_BATCH_SIZE=8\n", encoding="utf-8")

    settings = Settings(_env_file=env_file)

    assert settings.api_port == 9001
    assert settings.embedding_batch_size == 8


ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_keeps_its_name_and_each_group_its_fields() -> None:
    # Given the variables as they were named before Settings was written in groups
    # (tests/unit/data/settings_names.txt: a deployment's .env names them)
    before = set((ROOT / "tests" / "unit" / "data" / "settings_names.txt").read_text().split())

    # When the settings table is printed (ops/settings_table.py)
    table = subprocess.run(
        [sys.executable, "ops/settings_table.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    printed = re.findall(r"^\| `(ENGRAM_[A-Z0-9_]+)` \|", table, flags=re.M)

    # Then it names the same variables, each once, and every field is in exactly one group
    assert len(printed) == len(set(printed))
    assert set(printed) == before
    groups: list[type[BaseModel]] = [
        StoreSettings,
        PipelineSettings,
        SearchSettings,
        HttpSettings,
        OperationsSettings,
    ]
    grouped = [name for group in groups for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields)
