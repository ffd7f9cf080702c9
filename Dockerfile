# Multi-stage build: the dist binary (Cargo.toml's profile optimised across
# crates) in the Rust image, small Debian runtime.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# Cargo.toml names the micro-benchmark target; cargo needs its file to exist.
COPY bench/hot_paths.rs ./bench/hot_paths.rs
COPY openapi.yaml ./
RUN cargo build --profile dist --locked --bin zarr-serve \
 && strip target/dist/zarr-serve

FROM debian:bookworm-slim
# CA roots for https object stores (S3, GCS, Azure), taken from the build stage.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /src/target/dist/zarr-serve /usr/local/bin/zarr-serve
WORKDIR /app
COPY config/default.toml ./config/default.toml
COPY sample ./sample
# Configure with ZARR_SERVE_* variables, e.g. ZARR_SERVE_DATASETS=ocean=s3://bucket/ocean.zarr
ENV ZARR_SERVE_LISTEN=0.0.0.0:8080 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/zarr-serve", "--healthcheck"]
ENTRYPOINT ["/usr/local/bin/zarr-serve"]
