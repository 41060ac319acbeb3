# syntax=docker/dockerfile:1
#
# `executor serve` in a container, its data directory (the embedded store, the
# request-state key, the admin socket) on the volume /data. See README.md,
# "Running in a container":
#
#   docker build -t executor .
#   docker run -d --name executor -p 8787:8787 -v executor-data:/data --stop-timeout 60 \
#     -e EXECUTOR_PUBLIC_URL=http://<this machine's name>:8787 executor
#
# EXECUTOR_PUBLIC_URL is the address clients use: approval links point there
# and its host is accepted in requests. Without it, only localhost and
# 127.0.0.1 (a port published on this machine) are served.
#
# /data belongs to the image's user (uid 10001). A named volume starts as
# that; a bind-mounted host directory keeps its owner from the host (often
# root), and `executor serve` then stops at once saying it cannot write it:
# `chown -R 10001 <host dir>` on the host, or use a named volume.

FROM rust:1.95-slim-trixie AS build
WORKDIR /src
COPY . .
# QuickJS and ring are compiled with the image's C compiler; nothing else is needed.
# Stripped here rather than in the workspace's release profile, whose symbols
# the profiling scripts (scripts/profile-*) need.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_STRIP=true cargo build --release --locked -p executor-cli --bin executor \
    && cp target/release/executor /usr/local/bin/executor

FROM debian:trixie-slim
# CA certificates for HTTPS sources (OpenAPI specs, upstream MCP servers, OIDC keys).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --no-create-home executor \
    && mkdir -m 700 /data && chown executor /data
COPY --from=build /usr/local/bin/executor /usr/local/bin/executor
USER executor
WORKDIR /data
VOLUME /data
EXPOSE 8787
# `docker stop` sends SIGTERM: serve stops accepting, lets the requests in
# flight finish (up to 50 s with the default settings; give `docker stop -t 60`
# or `docker run --stop-timeout 60`, as Docker kills after 10 s) and exits 0.
# Healthy while GET /readyz answers 200 (a server without /readyz: /healthz);
# unhealthy, with the reason in `docker inspect`, while a source is unavailable.
# On another port than 8787: --health-cmd "executor health --url http://127.0.0.1:PORT".
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 CMD ["executor", "health"]
ENTRYPOINT ["executor"]
CMD ["serve", "--addr", "0.0.0.0:8787", "--data-dir", "/data"]
