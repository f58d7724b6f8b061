# ctxpipe worker/CLI image. The default torch wheel comes from PyPI; for a CPU-only image
# point pip at the PyTorch CPU index (--extra-index-url) where it is reachable.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

WORKDIR /app
COPY . .
# Editable install: sql/ and prompts/ are found next to the package sources in /app.
RUN pip install -e .

CMD ["ctxpipe", "--help"]
