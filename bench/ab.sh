#!/usr/bin/env bash
# ab.sh OLD NEW [ROUNDS]: an A/B of two commits on this machine. It builds each commit's
# bench test binary and cmd/throughput once, then runs them alternately, ROUNDS times
# (default 5; odd rounds OLD first, even rounds NEW first, so drift on a shared machine
# falls on both): AddingFields and Scaling for the fluentcore contenders, with zap→Discard
# as the control, then throughput for 5 s with 64 goroutines under each degrade policy in
# POLICIES (default "adaptive off"; commits older than the adaptive policy need
# POLICIES="sample off"). Raw output and benchstat's comparison go to bench/out/ab/.
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
old=${1:?usage: ab.sh OLD NEW [ROUNDS]} new=${2:?usage: ab.sh OLD NEW [ROUNDS]} rounds=${3:-5}
out=$PWD/out/ab
mkdir -p "$out"
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" 2>/dev/null; git worktree remove --force "$work/new" 2>/dev/null; rm -rf "$work"' EXIT

for side in old new; do
	rev=${!side}
	git worktree add --detach -q "$work/$side" "$rev"
	(cd "$work/$side/bench" && $GO test -c -o "$work/$side.test" . && $GO build -o "$work/$side-throughput" ./cmd/throughput)
	: >"$out/$side.txt"
	echo "$side: $(git rev-parse --short "$rev")" >&2
done

bench='^Benchmark(AddingFields|Scaling)$/.*/contender=(fluentcore|fluentcore-degrade-off|zap-json-discard)$'
run() { # side
	(cd "$work/$1/bench" && "$work/$1.test" -test.run '^$' -test.bench "$bench" -test.benchmem -test.count 1) |
		grep -E '^(Benchmark|goos:|goarch:|pkg:|cpu:)' >>"$out/$1.txt"
	for policy in ${POLICIES:-adaptive off}; do
		"$work/$1-throughput" -d 5s -g 64 -degrade "$policy" >>"$out/$1.txt"
	done
}
for i in $(seq "$rounds"); do
	if ((i % 2)); then run old; run new; else run new; run old; fi
	echo "round $i of $rounds done" >&2
done
$GO run "$BENCHSTAT" "$out/old.txt" "$out/new.txt" | tee "$out/benchstat.txt"
