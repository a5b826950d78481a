# relserve serving image: `python -m serve` on the task bundles in /artifacts (mounted or baked in).
#
#   docker build -t relserve .
#   docker run --rm -p 8000:8000 -v "$PWD/artifacts:/artifacts" relserve
#
# Build arguments:
#   BASE_IMAGE       default python:3.11-slim (CPU). For a CUDA image, a CUDA runtime base with
#                    apt, e.g. nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04; Python 3.11 is added
#                    from apt when the base lacks it. Run it with `docker run --gpus all ...`.
#   TORCH_VERSION    the pin of the Makefile (a test keeps them equal).
#   TORCH_INDEX_URL  the PyTorch wheel index to install torch from, i.e. the --index-url that
#                    pytorch.org's install selector shows (it ends in /whl/cpu for the CPU build,
#                    /whl/cu128 for CUDA 12.8). Empty (default): pip's configured index; on x86-64
#                    PyPI serves the CUDA build there, which runs on CPU too but is GBs larger.
#
# Only models/ and serve/ go in (serving never imports training/ or loadtest/), less serve/bench/
# (.dockerignore: benchmarks drive servers from outside). Batch scoring stays:
#   docker run --rm -v "$PWD/artifacts:/artifacts" relserve python -m serve.score --artifacts /artifacts ...
# `pip install .[redis]` installs the serving dependencies and the Redis client of `--ingest-log
# redis://` alone: no `train` extra (LightGBM), no `dev` one.

ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# g++: TorchInductor compiles the model's CPU kernels (and its C++ wrappers, which need the
# Python headers) at warm-up. python:3.11-slim ships Python with headers; other bases get it here.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && if ! command -v python3.11 >/dev/null 2>&1; then \
         apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev; \
       fi \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv /opt/venv

# torch first, pinned and from the chosen index, so that installing the project finds its
# requirement satisfied instead of pulling another build.
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==${TORCH_VERSION}"

WORKDIR /app
COPY pyproject.toml ./
COPY models ./models
COPY serve ./serve
RUN pip install ".[redis]" \
    && python -c "import torch; assert torch.__version__.startswith('${TORCH_VERSION}'), torch.__version__" \
    && python -c "import serve.http.app, serve.score.run, importlib.util as u; assert not u.find_spec('lightgbm')"

RUN useradd --system --uid 10001 --create-home --home-dir /home/relserve relserve \
    && mkdir -p /artifacts && chown relserve /artifacts
USER relserve

EXPOSE 8000
# Compile and warm-up run before /health turns 200, hence the long start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4).status != 200)"]

# Exec form: python is PID 1 and receives SIGTERM, which the server drains on (exit code 0).
CMD ["python", "-m", "serve", "--artifacts", "/artifacts", "--host", "0.0.0.0", "--port", "8000"]
