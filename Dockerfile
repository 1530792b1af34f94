# syntax=docker/dockerfile:1
#
# pullcheck's container image: one static musl binary on an empty base, no shell, run as
# 65532:65532. amd64 and arm64 through BuildKit's TARGETARCH, for example:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     -t ghcr.io/pullcheck/pullcheck:0.1.0 --push .
#
# Each platform's builder runs natively (under emulation for the foreign one), so musl-gcc
# from musl-tools is a native compiler for ring's C code and no cross toolchain is needed.
#
# This file is NOT built in this repository's tests: the development and CI machines have no
# container engine. scripts/build-image.sh assembles the same final stage (the same two
# files, modes, user, entrypoint and labels) from the binary scripts/build-static.sh
# builds, and scripts/image-smoke.sh pulls that image from a TLS registry and runs it with
# runc as 65532 on a read-only root filesystem. image-smoke.sh also checks that this file
# still declares that USER, ENTRYPOINT and those label values (version, source, title,
# description and licence come from Cargo.toml). See docs/container-image.md.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the crate needs (no .dockerignore: a COPY . . would send target/ along).
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY tests ./tests
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    set -eu; \
    case "$TARGETARCH" in \
      amd64) arch=x86_64 ;; \
      arm64) arch=aarch64 ;; \
      *) echo "unsupported TARGETARCH '$TARGETARCH' (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    triple="$arch-unknown-linux-musl"; \
    rustup target add "$triple"; \
    export "CC_${arch}_unknown_linux_musl=musl-gcc"; \
    cargo build --release --locked --target "$triple" --bin pullcheck; \
    install -D -m 0755 "target/$triple/release/pullcheck" /out/pullcheck; \
    /out/pullcheck --version

FROM scratch
ARG VERSION=0.1.0
ARG SOURCE=https://example.invalid/pullcheck
LABEL org.opencontainers.image.title="pullcheck" \
      org.opencontainers.image.description="Fail Kubernetes Jobs fast when an image can't be pulled: a registry probe with the kubelet's reference, keyring and platform rules." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build --chmod=0755 /out/pullcheck /pullcheck
COPY --chmod=0644 LICENSE /LICENSE
USER 65532:65532
ENTRYPOINT ["/pullcheck"]
