# slurmbridge: slim, non-root, read-only-root-filesystem friendly.
#   docker build -t slurmbridge .
#   docker run --rm slurmbridge --help
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY schemas ./schemas
COPY producers ./producers
COPY reconcilers ./reconcilers
COPY slurmbridge ./slurmbridge
# The simulators, test harness, real-Slurm rigs and demo never run in production (DESIGN §1):
# without them `slurmbridge run` needs real endpoints and says which (tests/e2e/test_image.py).
RUN rm -rf slurmbridge/devtools
# A wheel of the project, then its dependencies at the versions of requirements.lock and the
# wheel into a venv of their own; pip check fails the build if the lock misses a dependency.
RUN python -m pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/slurmbridge \
 && /opt/slurmbridge/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps \
      -r requirements.lock /wheels/*.whl \
 && /opt/slurmbridge/bin/pip check

FROM python:3.11-slim-bookworm
# The venv only: no compiler, no source tree, no pip cache.
COPY --from=build /opt/slurmbridge /opt/slurmbridge
ENV PATH=/opt/slurmbridge/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" uid; the chart runs the pod as it too. Any other uid works
# as well (the venv is world-readable, nothing is written outside /tmp): compose.yaml runs it
# as RUN_AS, e.g. the owner of a 0600 kubeconfig and token mounted from the host.
RUN groupadd --system --gid 65532 slurmbridge \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --shell /usr/sbin/nologin slurmbridge
USER 65532:65532
# metrics, health (/healthz, /readyz), admission webhook (TLS)
EXPOSE 8080 8081 9443
# Liveness on the health port (observability.healthPort, 8081 by default); Kubernetes uses the
# chart's probes instead, docker and compose this.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=2)"]
ENTRYPOINT ["slurmbridge"]
CMD ["run"]
