# syntax=docker/dockerfile:1
# Build: cgo is needed for SQLite.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/leasekeeper ./cmd/leasekeeper

# Run: a slim image, a non-root user, the database on a volume.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /data leasekeeper && mkdir -p /data && chown leasekeeper /data
COPY --from=build /out/leasekeeper /usr/local/bin/leasekeeper
USER leasekeeper
VOLUME /data
EXPOSE 8080
ENV LEASEKEEPER_ADDR=0.0.0.0:8080 LEASEKEEPER_DB=/data/leasekeeper.db
ENTRYPOINT ["leasekeeper"]
CMD ["serve"]
