# syntax=docker/dockerfile:1
# The one binary, `retail-media`, in a small runtime image (see deploy/README.md).
#
#   docker build -t retail-media .
#   docker run --rm -p 8080:8080 retail-media ingest   # RM_* variables configure it
#
# Stage 1 builds with the vendored librdkafka (cmake + a C toolchain + the curl headers,
# the same prerequisites as deploy/local/up.sh installs). Stage 2 is Debian slim with
# the binary only, running as an unprivileged user. The image sets the listen addresses
# to 0.0.0.0 and the data directory to a volume; everything else is an RM_* variable
# (`retail-media <sub> --help` lists them).
#
# Safe defaults, unlike the quick start (`cargo run --release`): no demo data (its
# clients have published secrets; RM_API_DEMO=true to try the image out), the
# integration inspector on 1% of tracking ids, and /healthz, /readyz with the reasons
# and /metrics on the operations listener, port 8090, which is for probes and
# Prometheus only: do not publish it. The public ports answer /healthz and /readyz
# (ready or not, never why) and no /metrics.

FROM rust:1-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake pkg-config libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the target dir between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin retail-media \
    && install -D -m 0755 target/release/retail-media /out/retail-media

FROM debian:bookworm-slim
# zlib is the binary's only shared library besides libc; ca-certificates for TLS to
# brokers and stores configured through RM_KAFKA_PROPERTIES / an https ClickHouse URL.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates zlib1g \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 retail-media \
    && useradd --system --uid 10001 --gid retail-media --home-dir /var/lib/retail-media \
        --shell /usr/sbin/nologin retail-media \
    && install -d -o retail-media -g retail-media /var/lib/retail-media
COPY --from=build /out/retail-media /usr/local/bin/retail-media
ENV RM_DATA_DIR=/var/lib/retail-media \
    RM_INGEST_ADDR=0.0.0.0:8080 \
    RM_API_ADDR=0.0.0.0:8081 \
    RM_AGGREGATOR_ADDR=0.0.0.0:8082 \
    RM_OPS_ADDR=0.0.0.0:8090 \
    RM_API_DEMO=false \
    RM_INGEST_INSPECTOR=0.01
VOLUME ["/var/lib/retail-media"]
WORKDIR /var/lib/retail-media
USER 10001:10001
# edge, api, aggregator; 8090 the operations listener (health, readiness, metrics)
EXPOSE 8080 8081 8082 8090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/retail-media"]
CMD ["all"]
