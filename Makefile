# The README's two commands: `go run ./cmd/fluentcore-demo` and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

.PHONY: test lint generate check-generate bench bench-smoke

# test: what CI and a newcomer run. Vet, the generated code is current, the race-enabled
# tests of the module, and bench-smoke (the bench module builds and every contender runs).
test: check-generate bench-smoke
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

# bench: every benchmark of the bench/ module with -count 5 (COUNT=n to change), benchstat,
# and the regenerated tables of bench/README.md and README.md and bench/chart.png. Long:
# about 20 minutes on 2 cores.
bench:
	GO=$(GO) bench/run.sh full

# bench-smoke: vet the bench module, run every benchmark once with a tiny -benchtime (the IBM
# client in its own binary), throughput for 1s and the table generator: under a minute.
bench-smoke:
	GO=$(GO) bench/run.sh smoke
