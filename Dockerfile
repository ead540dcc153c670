# No "# syntax=" line: the builder's own frontend is used, nothing is pulled for it.
# build compiles the binary (cgo is needed for SQLite); the caches are kept between builds.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/leasekeeper ./cmd/leasekeeper

# Run: a slim image, a numeric non-root user (Kubernetes runAsNonRoot can check it), the
# database on a volume the user owns, which is also the working directory.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 leasekeeper \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home leasekeeper \
 && mkdir -p /data && chown 10001:10001 /data
COPY --from=build /out/leasekeeper /usr/local/bin/leasekeeper
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8080
ENV LEASEKEEPER_ADDR=0.0.0.0:8080 LEASEKEEPER_DB=/data/leasekeeper.db
# The slim image has no curl: the binary asks its own /readyz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["leasekeeper", "health", "--server", "http://127.0.0.1:8080", "--timeout", "4s"]
ENTRYPOINT ["leasekeeper"]
CMD ["serve"]
