# syntax=docker/dockerfile:1
#
# mqgate container image: a static binary on distroless, running as the
# nonroot user (uid/gid 65532) with its store on the /data volume.
#
#   docker build -t mqgate --build-arg VERSION=$(git describe --tags --always) \
#       --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run -p 8080:8080 -v mqgate-data:/data \
#       -v "$PWD/plain_acl.yml:/etc/mqgate/plain_acl.yml:ro" mqgate
#
# The container listens on every interface, so it needs accounts: it
# reads /etc/mqgate/plain_acl.yml (see the README's "Authentication") and
# refuses to start without it. The file must be readable by uid 65532:
# chown 65532 and chmod 600 a file with plain secretKey values, or keep
# only secretKeyHash values (`docker run --rm -i mqgate hash-secret`)
# in a file that may be 0644. To run without authentication anyway (a
# private network you trust): -e MQGATE_ACL_FILE= -e MQGATE_INSECURE_NO_AUTH=true.
#
# Kubernetes ignores HEALTHCHECK: probe GET /livez (liveness) and
# GET /readyz (readiness) on port 8080 instead.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
        -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${REVISION}" \
        -o /out/mqgate ./cmd/mqgate \
    && mkdir -p -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="mqgate" \
      org.opencontainers.image.description="HTTP/REST message gateway over a RocketMQ-style store" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/mqgate/mqgate" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/mqgate /mqgate
COPY --from=build --chown=65532:65532 /out/data /data
ENV MQGATE_DATA_DIR=/data \
    MQGATE_LISTEN=0.0.0.0:8080 \
    MQGATE_ACL_FILE=/etc/mqgate/plain_acl.yml \
    MQGATE_LOG_FORMAT=json
VOLUME /data
EXPOSE 8080
USER 65532:65532
# mqgate handles SIGTERM: readiness 503, drain, then flush and exit 0.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["/mqgate", "healthcheck"]
ENTRYPOINT ["/mqgate"]
CMD ["serve"]
