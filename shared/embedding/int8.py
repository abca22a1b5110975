"""The local model's matrix products in int8: a copy of the ONNX file, made once and cached.

The packaged MiniLM stores int8 weights, but onnxruntime folds them back to float32 at load, so
every product runs in float (docs/operations/embedding-model.md). Here the file is made again with
onnxruntime's own tools: its initializers folded to float (``ORT_ENABLE_BASIC``, saved), then
``quantize_dynamic``: each weight matrix int8 per output channel, each activation quantized to
uint8 as it runs (``DynamicQuantizeLinear``, ``MatMulInteger``: VNNI where the CPU has it), but for
the products ``_kept_in_float`` names. On this 2-core EPYC a chunk of the bench's corpus costs 8.3
CPU-ms against 13, a conversation turn 4.0 against 5.7, a query 0.9 against 1.7; the vectors agree
with float's at a mean cosine of 0.997 (docs/operations/embedding-model.md).

An activation's scale is taken over the whole tensor it quantizes, so texts in one model run would
move each other's vectors (cosine 0.985 at worst against the text alone): ``LocalOnnxEmbedder``
runs each text alone on this file, and a text's vector is the same whatever it was embedded with.

The copy is named by the source file's SHA-256, onnxruntime's version and this recipe's, in
``ENGRAM_LOCAL_MODEL_CACHE``: every process of a machine finds the one made first; two processes
starting at once make it once (a lock beside it), and a half-written file is never read (made
under a temporary name, then renamed).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import onnxruntime as ort

from shared.errors import ConfigurationError

log = logging.getLogger(__name__)

RECIPE = "dynamic-qint8-per-channel-early-ffn-out-float-1"
"""Changes whenever the way the copy is made does, so a copy made the old way is not reused."""


def int8_model(source: Path, cache: Path) -> Path:
    """The int8 copy of ``source`` in ``cache``, made first if no process has made it yet."""
    key = _key(source)
    target = cache / f"{source.stem}-int8-{key}.onnx"
    if target.is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f"{target.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process making it: wait, then use its copy
            if not target.is_file():
                _make(source, target)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot make the int8 copy of {source} in {cache}: {exc}; set ENGRAM_LOCAL_MODEL_CACHE "
            "to a writable folder, or ENGRAM_LOCAL_COMPUTE=float to run the model as it is"
        ) from exc
    return target


def _key(source: Path) -> str:
    if not source.is_file():
        raise ConfigurationError(f"ONNX model not found: {source}")
    digest = hashlib.sha256()
    with open(source, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    digest.update(f"\0{ort.__version__}\0{RECIPE}".encode())
    return digest.hexdigest()[:16]


def _make(source: Path, target: Path) -> None:
    # Imported here: a process that runs the model in float never loads the quantizer (or onnx).
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log.info("making the int8 copy of %s: %s", source, target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".int8-") as work:
        folded, quantized = Path(work) / "folded.onnx", Path(work) / "int8.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        root = logging.getLogger()
        root.addFilter(_no_advice)
        try:
            ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
            quantize_dynamic(
                folded,
                quantized,
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_exclude=_kept_in_float(folded),
            )
        except Exception as exc:  # onnxruntime's and onnx's own errors: the file is not one it can read
            raise ConfigurationError(
                f"cannot quantize {source}: {exc}; ENGRAM_LOCAL_COMPUTE=float runs it as it is"
            ) from exc
        finally:
            root.removeFilter(_no_advice)
        os.replace(quantized, target)


def _no_advice(record: logging.LogRecord) -> bool:
    """quantize_dynamic's warning that the file was not pre-processed, said on the root logger: the
    folding above is the pre-processing's optimisation, and its shape inference is the quantizer's
    own (the symbolic one it would add needs sympy and changes nothing in MiniLM's products)."""
    return not record.getMessage().startswith("Please consider to run pre-processing")


def _kept_in_float(model: Path) -> list[str]:
    """The feed-forward's second product (a weight of more rows than columns: 1536 -> 384) in the
    first half of the layers: its input, after GELU, has the widest range of any product's, and a
    scale over it costs most there. In float they take the mean cosine to the float model from
    0.9953 to 0.9975 and the top-10 overlap of 650 searches from 0.878 to 0.911, for 1.1 CPU-ms
    a chunk (8.3 against 7.3; 13.3 all in float): docs/operations/embedding-model.md."""
    import onnx

    graph = onnx.load(str(model)).graph
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}  # the shapes alone, nothing decoded
    narrowing = [
        node.name
        for node in graph.node  # in the order they run: layer by layer
        if node.op_type == "MatMul"
        and len(shape := shapes.get(node.input[1], ())) == 2
        and shape[0] > shape[1]
    ]
    return narrowing[: (len(narrowing) + 1) // 2]
