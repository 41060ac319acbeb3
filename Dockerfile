# syntax=docker/dockerfile:1
#
# `executor serve` in a container, its data directory (the embedded store, the
# request-state key, the admin socket) on the volume /data. See README.md,
# "Running in a container":
#
#   docker build -t executor .
#   docker run -d --name executor -p 8787:8787 -v executor-data:/data \
#     -e EXECUTOR_PUBLIC_URL=http://<this machine's name>:8787 executor
#
# EXECUTOR_PUBLIC_URL is the address clients use: approval links point there
# and its host is accepted in requests. Without it, only localhost and
# 127.0.0.1 (a port published on this machine) are served.

FROM rust:1.95-slim-trixie AS build
WORKDIR /src
COPY . .
# QuickJS and ring are compiled with the image's C compiler; nothing else is needed.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p executor-cli --bin executor \
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
# `executor serve` stops on Ctrl-C (SIGINT) after the requests in flight.
STOPSIGNAL SIGINT
ENTRYPOINT ["executor"]
CMD ["serve", "--addr", "0.0.0.0:8787", "--data-dir", "/data"]
