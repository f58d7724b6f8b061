# ctxpipe worker/CLI image: every role of docker-compose.yml runs from it (ops/run-*.sh).
# torch is pinned by constraints.txt (2.13.0); for a CPU-only image point pip at the PyTorch CPU
# index (--extra-index-url) where it is reachable. For GPU workers use a CUDA-enabled torch.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

# Workers run unprivileged; /data/fs (ContextFS volume) and /data/var (beat state) belong to
# them, and named volumes mounted there inherit that ownership.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin ctxpipe \
    && mkdir -p /data/fs /data/var \
    && chown -R ctxpipe:ctxpipe /data

WORKDIR /app
COPY . .
# A regular install: the wheel carries sql/ and prompts/; /app keeps the ops/ launchers.
RUN pip install -c constraints.txt '.[server]' && chmod 0755 ops/*.sh

USER ctxpipe
CMD ["ctxpipe", "--help"]
