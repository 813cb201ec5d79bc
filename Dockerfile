# One image for every service; compose.yaml picks the module per container.
FROM python:3.11-slim
WORKDIR /app
# the installed packages live in site-packages: point them at the policy file copied here
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    MLUTP_POLICY_PATH=/app/policy/polling_policy.yaml
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY emulator ./emulator
COPY client ./client
COPY devtools ./devtools
COPY demo ./demo
COPY policy ./policy
# no extra: the embedded Redis (the `embedded-redis` extra, 61 MB) is for `mlutp run` and the
# tests; a service here is given REDIS_URL (or REDIS_CLUSTER_NODES)
RUN pip install --no-cache-dir .
USER nobody
CMD ["python", "-m", "services.orders_state"]
