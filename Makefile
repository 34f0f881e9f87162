# The README's two commands: `go run ./cmd/fluentcore-demo` and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

.PHONY: test race-test lint generate check-generate fuzz-smoke

# The root package's fuzz targets; fuzz-smoke runs each for FUZZTIME.
FUZZ_TARGETS ?= FuzzAppendEntry FuzzAppendJSON FuzzStringsMatchZap
FUZZTIME ?= 10s

# test: what CI and a newcomer run. The generated code is current, vet, the race-enabled
# tests of the module, then a short run of every fuzz target.
test: check-generate race-test fuzz-smoke

race-test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# fuzz-smoke fuzzes each target briefly (go test -fuzz takes one target at a time). New
# interesting inputs are minimised for at most 100 runs, so the time goes to fuzzing.
fuzz-smoke:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=100x . || exit 1; \
	done

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

generate:
	$(GO) generate ./...

# check-generate fails if `go generate` would change a committed file.
check-generate:
	@$(GO) generate ./... && git diff --exit-code -- '*_gen.go' '*_gen_test.go' || \
		(echo "generated code is stale: run 'make generate' and commit"; exit 1)
