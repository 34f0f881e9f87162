# The README's two commands: `go run ./cmd/fluentcore-demo` and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0

.PHONY: test race-test short lint generate check-generate fuzz-smoke soak guarantees interop bench bench-smoke alert-rules flake

# The fuzz targets, as package:target; fuzz-smoke runs each for FUZZTIME.
FUZZ_TARGETS ?= ./internal/zapenc:FuzzAppendEntry ./internal/msgpenc:FuzzAppendJSON ./internal/zapenc:FuzzStringsMatchZap \
	./internal/wire:FuzzParseHELO ./internal/wire:FuzzParsePONG ./internal/wire:FuzzParseAck
# A count, not a duration: Go 1.26's fuzz coordinator can fail a healthy target with "context
# deadline exceeded" when a duration runs out under CPU load (golang/go#75804, fixed in 1.27);
# a count has no deadline to race.
FUZZTIME ?= 20000x
# How long `make soak` runs TestSoak.
SOAK ?= 60s
# Where `make guarantees` has the fault suite write its table.
GUARANTEES_OUT ?= build/guarantees.md

# test: what CI and a newcomer run. The generated code is current, vet, the race-enabled
# tests of the module, a short run of every fuzz target, the soak, bench-smoke (the bench
# module builds and every contender runs), then the interop tests against real receivers.
test: check-generate race-test alert-rules fuzz-smoke soak bench-smoke interop

# The root package runs first and alone: its real-time fault rows compare a service's
# rate during an outage with its rate before it, which another package's tests busy on the
# same cores would skew.
race-test:
	$(GO) vet ./...
	$(GO) test -race -count=1 .
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -vx 'github.com/fluentcore/fluentcore')

# short: the inner loop, about a minute on 2 cores: every test but the real-time fault rows
# (tens of seconds each), the long fuzz seeds and the soak; no race detector.
short:
	$(GO) test -short -count=1 ./...

# flake: run the tests RUN matches (a go test -run pattern) in PKG N times in a row under
# -race, with a CPU-bound neighbour on every core, as a shared CI machine has; it stops at
# the first failure. E.g. make flake RUN='^TestFaults$$' N=20, or make flake PKG=./... for
# the whole suite.
RUN ?= .
N ?= 10
PKG ?= .
flake:
	@mkdir -p build
	@trap 'kill $$busy 2>/dev/null' EXIT; busy=; \
	for c in $$(seq $$(nproc)); do sh -c 'while :; do :; done' & busy="$$busy $$!"; done; \
	for i in $$(seq $(N)); do \
		start=$$(date +%s); \
		$(GO) test -race -count=1 -run='$(RUN)' $(PKG) >build/flake.out 2>&1 || \
			{ grep -v '^ok' build/flake.out | tail -60; echo "flake: run $$i of $(N) failed after $$(( $$(date +%s) - start )) s (build/flake.out)"; exit 1; }; \
		echo "flake: run $$i of $(N) passed in $$(( $$(date +%s) - start )) s"; \
	done

# alert-rules: promtool checks dashboards/alerts.yml and runs its unit tests
# (dashboards/alerts_test.yml), when promtool is installed (Debian package prometheus; .ci/run
# installs it).
alert-rules:
	@if command -v promtool >/dev/null; then \
		promtool check rules dashboards/alerts.yml && promtool test rules dashboards/alerts_test.yml; \
	else \
		echo "alert-rules: promtool not installed (apt-get install prometheus): skipped"; \
	fi

# interop: the core against real Forward receivers from the registries (interop/README.md).
# Installs them first: @fluent-org/logger from the committed lock file (npm ci, no install
# scripts), the OpenTelemetry receiver's modules; the tests build interop/otelrecv.
interop:
	cd interop/node && npm ci --ignore-scripts --no-audit --no-fund
	cd interop/otelrecv && $(GO) mod download && $(GO) vet ./...
	cd interop && $(GO) mod download && $(GO) vet ./...
	cd interop && $(GO) test -race -count=1 ./...

# fuzz-smoke fuzzes each target briefly (go test -fuzz takes one target at a time). New
# interesting inputs are minimised for at most 100 runs, so the time goes to fuzzing.
fuzz-smoke:
	@for pt in $(FUZZ_TARGETS); do \
		p=$${pt%%:*}; t=$${pt#*:}; \
		echo "fuzz $$t in $$p for $(FUZZTIME)"; \
		$(GO) list -f '{{range .TestGoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$.Dir}}/{{.}} {{end}}' $$p | xargs grep -q "^func $$t(" \
			|| { echo "fuzz target $$t not in $$p"; exit 1; }; \
		$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=100x $$p || exit 1; \
	done

# soak: full-rate logging with the receivers restarted every few seconds; RSS and
# goroutines must stay flat (TestSoak; `go test ./...` skips it).
soak:
	$(GO) test -count=1 -run='^TestSoak$$' -v . -args -soak=$(SOAK)

# guarantees: run the fault suite and put its results in docs/guarantees.md's table.
guarantees:
	@mkdir -p $(dir $(GUARANTEES_OUT))
	$(GO) test -count=1 -run='^TestFaults$$' . -args -guarantees=$(abspath $(GUARANTEES_OUT))
	$(GO) run ./internal/guarantees/splice -table $(GUARANTEES_OUT) -doc docs/guarantees.md

# lint: vet, staticcheck on every module, and golangci-lint (.golangci.yml) on the library.
lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...
	cd interop && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd interop/otelrecv && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd bench && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

generate:
	$(GO) generate ./...

# check-generate fails if `go generate` would change a committed file.
check-generate:
	@$(GO) generate ./... && git diff --exit-code -- '*_gen.go' '*_gen_test.go' || \
		(echo "generated code is stale: run 'make generate' and commit"; exit 1)

# bench: every benchmark of the bench/ module with -count 5 (COUNT=n to change), benchstat,
# and the regenerated tables of bench/README.md, docs/benchmarks.md and bench/TARGETS.md, and bench/chart.png. Long:
# about 20 minutes on 2 cores.
bench:
	GO=$(GO) bench/run.sh full

# bench-smoke: vet the bench module, run every benchmark once with a tiny -benchtime (the IBM
# client in its own binary), throughput for 1s and the table generator: under a minute.
bench-smoke:
	GO=$(GO) bench/run.sh smoke
