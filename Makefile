# The README's two commands: `go run ./cmd/fluentcore-demo` and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

.PHONY: test lint generate check-generate interop

# test: what CI and a newcomer run. Vet, the generated code is current, the race-enabled
# tests of the module, then the interop tests against real receivers.
test: check-generate
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory interop

# interop: the core against real Forward receivers from the registries (interop/README.md).
# Installs them first: @fluent-org/logger from the committed lock file (npm ci, no install
# scripts), the OpenTelemetry receiver's modules; the tests build interop/otelrecv.
interop:
	cd interop/node && npm ci --ignore-scripts --no-audit --no-fund
	cd interop/otelrecv && $(GO) mod download && $(GO) vet ./...
	cd interop && $(GO) mod download && $(GO) vet ./...
	cd interop && $(GO) test -race -count=1 ./...

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd interop && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd interop/otelrecv && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

generate:
	$(GO) generate ./...

# check-generate fails if `go generate` would change a committed file.
check-generate:
	@$(GO) generate ./... && git diff --exit-code -- '*_gen.go' '*_gen_test.go' || \
		(echo "generated code is stale: run 'make generate' and commit"; exit 1)
