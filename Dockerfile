# ralph with git and bubblewrap on Debian. Build: docker build -t ralph .
# (--build-arg VERSION=… stamps `ralph --version`; make check passes it.)

FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags natsserver \
      -ldflags "-s -w -X github.com/ralph-loop/ralph/internal/cli.version=${VERSION}" \
      -o /out/ralph ./cmd/ralph

FROM debian:trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 # a repository mounted from the host belongs to another user: let git work in it
 && git config --system --add safe.directory '*'
COPY --from=build /out/ralph /usr/local/bin/ralph
WORKDIR /work
ENTRYPOINT ["ralph"]
