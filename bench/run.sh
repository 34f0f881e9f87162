#!/usr/bin/env bash
# Runs the bench module: `run.sh full` (make bench) or `run.sh smoke` (make bench-smoke).
#
# full: every benchmark with -count $COUNT (default 5; BenchmarkDegrade $DEGRADE_COUNT, 3; the timed ones
# in $COUNT alternating rounds), the IBM client in its own binary,
# forwardtest's own receiver benchmark, cmd/throughput; raw output in bench/results/, then
# benchstat (bench/results/benchstat.txt) and cmd/benchtable, which regenerates the tables of
# bench/README.md, docs/benchmarks.md and bench/TARGETS.md, and bench/chart.png.
#
# smoke: vet, then every benchmark once with a tiny -benchtime, the IBM binary, throughput for
# 1s and the table generator on that output (into a temporary directory): proves that the
# module builds and every contender still runs, in well under a minute.
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
COUNT=${COUNT:-5}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

# The benchmark groups and their -benchtime: the scenarios and micro-benchmarks are timed
# (default 1s); outage and caller latency time a fixed number of calls; err latency logs one
# err entry per 5ms.
TIMED='^Benchmark(AddingFields|AccumulatedContext|WithoutFields|Sugar|CoreWrite|Scaling|Buffers|Receiver|Tags|Refused)$'
SCENARIOS='^Benchmark(AddingFields|AccumulatedContext|WithoutFields|Sugar)$'

# keep filters go test's output down to benchmark and configuration lines: the clients print
# diagnostics of the form "word: text" that benchmark tools would take for configuration.
keep() { grep -E '^(Benchmark|goos:|goarch:|pkg:|cpu:)' || true; }

header() {
	echo "goversion: $($GO env GOVERSION)"
	echo "ncpu: $(nproc)"
	echo "gomaxprocs: ${GOMAXPROCS:-$(nproc)}"
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "count: $1"
	if c=$(git rev-parse --short HEAD 2>/dev/null); then echo "commit: $c"; fi
	echo "loadavg-start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

gotest() { $GO test -run '^$' -benchmem -timeout 3h "$@"; }

case "${1:-}" in
full)
	mkdir -p results
	raw=results/raw.txt
	header "$COUNT" >"$raw"
	# One round of every timed benchmark at a time, contenders in reverse order every other
	# round: the machine is shared and drifts, and -count would run one contender's rounds
	# back to back, so that a slow minute could fall on one side of a comparison only.
	for i in $(seq "$COUNT"); do
		order=()
		if ((i % 2 == 0)); then order=(-bench.reverse); fi
		gotest -bench "$TIMED" -count 1 . "${order[@]}" | tee /dev/stderr | keep >>"$raw"
	done
	gotest -bench '^BenchmarkOutage$' -benchtime 200000x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	gotest -bench '^BenchmarkCallerLatency$' -benchtime 200000x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	gotest -bench '^BenchmarkErrLatency$' -benchtime 400x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	gotest -bench '^BenchmarkOutageCallerLatency$' -benchtime 4000x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	# The degrade scenarios are timed by the clock (about 2 minutes a round): DEGRADE_COUNT rounds.
	gotest -bench '^BenchmarkDegrade$' -benchtime 1x -count "${DEGRADE_COUNT:-3}" . -bench.degrade-series results/degrade-series.csv | tee /dev/stderr | keep >>"$raw"
	# The hot path's cost: the default, zap→Discard and degrade off in turns, about 25 s a round.
	gotest -bench '^BenchmarkHotPath$' -benchtime 1x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	# The degrade rule: the default against DegradeOff, about 2 minutes a round.
	gotest -bench '^BenchmarkDegradeRule$' -benchtime 1x -count "${DEGRADE_COUNT:-3}" . | tee /dev/stderr | keep >>"$raw"
	# Scale-out and acks: timed by the clock too, sixteen shapes of about 4 s a round.
	gotest -bench '^BenchmarkScaleOut$' -benchtime 1x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	gotest -bench '^BenchmarkMaxInflight$' -benchtime 1x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	# Logger tags: a flood on one tag, and 10,000 names past Tags.Max; 5 s each.
	gotest -bench '^BenchmarkTag(Flood|Cardinality)$' -benchtime 1x -count "$COUNT" . | tee /dev/stderr | keep >>"$raw"
	echo "loadavg-end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"

	ibm=results/raw-ibm.txt
	header "$COUNT" >"$ibm"
	gotest -tags ibm -bench "$SCENARIOS/./contender=(ibm-fluent-forward-go|zap-json-discard)\$" -count "$COUNT" . | tee /dev/stderr | keep >>"$ibm"
	gotest -tags ibm -bench '^BenchmarkOutage$/contender=ibm-fluent-forward-go$' -benchtime 200000x -count "$COUNT" . | tee /dev/stderr | keep >>"$ibm"

	(cd .. && $GO test -run '^$' -bench '^BenchmarkCountOnly$' -count "$COUNT" ./forwardtest/) | tee /dev/stderr | keep >results/forwardtest.txt
	# The encoder alone against zap's JSON encoder on the same entry, one CPU, a round of each
	# at a time.
	enc=results/encoder.txt
	header "$COUNT" >"$enc"
	for i in $(seq "$COUNT"); do
		(cd .. && $GO test -run '^$' -bench '^Benchmark(ZapJSON)?EncodeEntry$' -benchtime 0.5s -cpu 1 -benchmem -count 1 ./internal/zapenc/) | tee /dev/stderr | keep >>"$enc"
	done

	tp=results/throughput.txt
	: >"$tp"
	for i in $(seq "$COUNT"); do
		$GO run ./cmd/throughput -d 10s -g 64 >>"$tp"
		$GO run ./cmd/throughput -d 10s -g 64 -degrade off >>"$tp"
		$GO run ./cmd/throughput -d 10s -g 64 -contender zap-json-discard >>"$tp"
	done

	{
		$GO run "$BENCHSTAT" "$raw"
		echo
		$GO run "$BENCHSTAT" "$ibm"
		echo
		$GO run "$BENCHSTAT" "$tp"
	} >results/benchstat.txt
	$GO run ./cmd/benchtable -results results -readme README.md -top ../docs/benchmarks.md -targets TARGETS.md -chart chart.png
	$GO run ./cmd/degradeplot -series results/degrade-series.csv -out degrade.png
	;;
smoke)
	$GO vet ./...
	$GO vet -tags ibm ./...
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	header 1 >"$tmp/raw.txt"
	gotest -bench . -benchtime 200x -count 1 . -bench.outage=500ms -bench.degrade=300ms -bench.scaleout=300ms -bench.rule-scale=0.1 -bench.tagflood=300ms -bench.degrade-series "$tmp/degrade-series.csv" | keep >>"$tmp/raw.txt"
	gotest -tags ibm -bench '^Benchmark(AddingFields|Outage)$/(mode=single|contender=ibm-fluent-forward-go)$' -benchtime 200x -count 1 . -bench.outage=500ms | keep >"$tmp/raw-ibm.txt"
	$GO test -count 1 ./...
	$GO run ./cmd/throughput -d 1s -g 64 >"$tmp/throughput.txt"
	$GO run ./cmd/throughput -d 1s -g 64 -contender zap-json-discard >>"$tmp/throughput.txt"
	cp README.md "$tmp/bench-README.md"
	cp ../docs/benchmarks.md "$tmp/benchmarks.md"
	cp TARGETS.md "$tmp/TARGETS.md"
	$GO run ./cmd/benchtable -results "$tmp" -readme "$tmp/bench-README.md" -top "$tmp/benchmarks.md" -targets "$tmp/TARGETS.md" -chart "$tmp/chart.png"
	$GO run ./cmd/degradeplot -series "$tmp/degrade-series.csv" -out "$tmp/degrade.png"
	for c in fluentcore fluentcore-degrade-off zap-json-discard zap-json-bws-tcp fluent-logger-async fluent-logger-sync fluent-logger-async-ack lestrrat-fluent-client; do
		grep -q "contender=$c-" "$tmp/raw.txt" || { echo "bench-smoke: no results for $c"; exit 1; }
	done
	grep -q "contender=ibm-fluent-forward-go-" "$tmp/raw-ibm.txt" || { echo "bench-smoke: no results for the IBM client"; exit 1; }
	echo "bench-smoke: ok"
	;;
*)
	echo "usage: $0 full|smoke" >&2
	exit 2
	;;
esac
