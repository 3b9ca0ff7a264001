# mqgate — developer entry points. `make test` is what CI runs.
GO            ?= go
STATICCHECK   ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS          := ./...

SWAG          ?= $(GO) run github.com/swaggo/swag/cmd/swag@v1.16.6
OASDIFF       ?= $(GO) run github.com/oasdiff/oasdiff@v1.38.0

.PHONY: all build run test lint fmt-check vet staticcheck docs docs-check clients clients-check clients-go clients-go-check spec-lint spec-breaking test-race bench bench-http fuzz clean

all: build

build:
	$(GO) build -buildvcs=auto -o bin/mqgate ./cmd/mqgate

run:
	$(GO) run ./cmd/mqgate

## test: every check of lint and every test under the race detector
## (tools/test.sh: the generated-file checks first, then the rest of lint
## beside the tests; it ends with the PostgreSQL tests skipped, if any, and
## "N passed, N failed").
test:
	@GO="$(GO)" MAKE="$(MAKE)" PKGS="$(PKGS)" tools/test.sh

lint: lint-generated lint-static

## lint-generated: the checks that regenerate files in the tree (the tests read them).
lint-generated: docs-check clients-check clients-ts-generated-check console-client-check

## lint-static: the checks that only read the tree.
lint-static: fmt-check vet staticcheck clients-ts-typecheck spec-lint spec-breaking

## docs: regenerate the OpenAPI spec (swag -> Swagger 2.0 -> OpenAPI 3). Never hand-edit docs/.
docs:
	$(SWAG) init --quiet --requiredByDefault -g api/api.go -o docs
	$(GO) run ./tools/openapi3 -in docs/swagger.json -out docs/openapi.json

## docs-check: fail when the committed spec is stale.
docs-check: docs
	@git diff --exit-code -- docs/ || { echo "docs/ is stale: run 'make docs' and commit"; exit 1; }

## clients: regenerate the generated API clients from the committed docs/openapi.json.
clients: clients-go

## clients-check: fail when a committed generated client is stale.
clients-check: clients-go-check

## clients-go: regenerate clients/go (oapi-codegen, pinned in clients/go/generate.go).
clients-go:
	$(GO) generate ./clients/go

## clients-go-check: fail when clients/go does not match docs/openapi.json.
clients-go-check: clients-go
	@git diff --exit-code -- clients/go/ && test -z "$$(git status --porcelain -- clients/go/)" || \
	  { echo "clients/go is stale: run 'make clients' and commit"; exit 1; }

## spec-lint: lint docs/openapi.json with @redocly/cli, pinned in tools/spec/package-lock.json
## (npm ci from the registry, or its cache; Node.js 20.19+ or 22.12+).
SPEC_TOOLS    := tools/spec
spec-lint:
	@command -v npm >/dev/null || { echo "spec-lint needs node and npm"; exit 1; }
	@node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>=22&&(a>22||b>=12)||a===20&&b>=19?0:1)' || \
	  { echo "spec-lint: @redocly/cli needs Node.js 20.19+ or 22.12+, not $$(node --version)"; exit 1; }
	@cd $(SPEC_TOOLS) && npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_NOTIFICATIONS=true $(SPEC_TOOLS)/node_modules/.bin/redocly lint \
	  --config $(SPEC_TOOLS)/redocly.yaml docs/openapi.json

## spec-breaking: fail on a breaking change of docs/openapi.json (oasdiff) against
## the last release tag or main that docs/BREAKING-ALLOWED does not list.
spec-breaking:
	@OASDIFF="$(OASDIFF)" $(SPEC_TOOLS)/breaking.sh

## clients-ts: regenerate clients/ts/src/schema.ts from docs/openapi.json with the
## openapi-typescript pinned in clients/ts/package-lock.json (npm ci from the registry,
## or its cache). clients-ts-check (in lint): fail when the committed file is stale,
## and typecheck the package and its tests with the pinned tsc.
.PHONY: clients-ts clients-ts-check clients-ts-generated-check clients-ts-typecheck lint-generated lint-static
TS_CLIENT     := clients/ts
clients-ts:
	@command -v npm >/dev/null || { echo "clients-ts needs node and npm"; exit 1; }
	@cd $(TS_CLIENT) && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error
	cd $(TS_CLIENT) && npm run --silent generate

## clients-matrix: only the generator matrix (clients/matrix: ogen,
## oapi-codegen without clients/go's overlay and @hey-api/openapi-ts, pinned there, each generating from docs/openapi.json
## and running a program against a real server). `make test` runs it too, as
## part of go test ./...; with CI set a missing node/npm or Go module proxy
## fails it instead of skipping.
.PHONY: clients-matrix
clients-matrix:
	$(GO) test -count=1 -v ./clients/matrix/

clients-ts-check: clients-ts-generated-check clients-ts-typecheck

clients-ts-generated-check: clients-ts
	@git diff --exit-code -- $(TS_CLIENT)/src/schema.ts || { echo "$(TS_CLIENT)/src/schema.ts is stale: run 'make clients-ts' and commit"; exit 1; }

## clients-ts-typecheck installs only when node_modules is missing: in make lint
## and make test, clients-ts has just installed it (and the tests read clients/ts).
clients-ts-typecheck:
	@test -d $(TS_CLIENT)/node_modules || { cd $(TS_CLIENT) && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error; }
	cd $(TS_CLIENT) && npm run --silent typecheck
	$(TS_CLIENT)/node_modules/.bin/tsc -p web/tsconfig.json

## console-client: vendor the TypeScript client (clients/ts/src/index.ts
## compiled by its pinned tsc) and openapi-fetch into web/dist/vendor/ for
## the console, which has no build step; console-client-check (in lint)
## fails when the committed copies are stale.
.PHONY: console-client console-client-check
console-client:
	@test -d $(TS_CLIENT)/node_modules || { cd $(TS_CLIENT) && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error; }
	node web/scripts/vendor-client.mjs

console-client-check: clients-ts
	node web/scripts/vendor-client.mjs --check

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
