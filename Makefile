# mqgate — developer entry points. `make test` is what CI runs.
GO            ?= go
STATICCHECK   ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS          := ./...

SWAG          ?= $(GO) run github.com/swaggo/swag/cmd/swag@v1.16.6

.PHONY: all build run test lint fmt-check vet staticcheck docs docs-check test-race bench bench-http fuzz clean

all: build

build:
	$(GO) build -o bin/mqgate ./cmd/mqgate

run:
	$(GO) run ./cmd/mqgate

## test: formatting, vet, staticcheck, then every test under the race detector.
test: lint test-race

lint: fmt-check vet staticcheck docs-check

## docs: regenerate the OpenAPI spec (swag -> Swagger 2.0 -> OpenAPI 3). Never hand-edit docs/.
docs:
	$(SWAG) init --quiet --requiredByDefault -g api/api.go -o docs
	$(GO) run ./tools/openapi3 -in docs/swagger.json -out docs/openapi.json

## docs-check: fail when the committed spec is stale.
docs-check: docs
	@git diff --exit-code -- docs/ || { echo "docs/ is stale: run 'make docs' and commit"; exit 1; }

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(STATICCHECK) $(PKGS)

test-race:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

## bench: the storage benchmarks with the raw-disk baseline in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=2s ./storage/...

## bench-http: the HTTP hot paths (send single, send batch of 100, pull 32,
## ack) of a real server on loopback, with a bare net/http baseline in the
## same run: read each path as a ratio to Baseline.
bench-http:
	$(GO) test -run '^$$' -bench 'BenchmarkHTTP' -benchmem -benchtime=2s -count=3 ./server/

## fuzz: a short run of every fuzz target (FUZZTIME=30s by default); all
## targets run, and the target fails at the end if any of them failed.
FUZZTIME ?= 30s
fuzz:
	@failed=""; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || failed="$$failed $$t"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

clean:
	rm -rf bin
