# The README's two commands: `go run ./cmd/fluentcore-demo` and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

.PHONY: test lint generate check-generate

# test: what CI and a newcomer run. Vet, the generated code is current, the race-enabled
# tests of the module.
test: check-generate
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

generate:
	$(GO) generate ./...

# check-generate fails if `go generate` would change a committed file.
check-generate:
	@$(GO) generate ./... && git diff --exit-code -- '*_gen.go' '*_gen_test.go' || \
		(echo "generated code is stale: run 'make generate' and commit"; exit 1)
