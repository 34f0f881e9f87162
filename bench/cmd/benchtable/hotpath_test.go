package main

import (
	"strings"
	"testing"
)

// The hot path's rows read each figure from its own input, judge it against its target and
// say what it was measured against: BenchmarkHotPath's turns, the encoder's file,
// BenchmarkRefused's two receivers, the one-CPU degrade scenario, and cmd/throughput's
// default and degrade off.
func TestHotPathRows(t *testing.T) {
	const raw = `BenchmarkRefused/receiver=refused-2 	1000	700 ns/op	1400 cpu-ns/op	0.97 info-dropped/op
BenchmarkRefused/receiver=healthy-2 	1000	1400 ns/op	2000 cpu-ns/op	0.03 info-dropped/op
BenchmarkDegradeRule/scenario=flat-out-one-cpu/goroutines=8-2 	1	1 ns/op	1.10 delivered-ratio
BenchmarkDegradeRule/scenario=flat-out-one-cpu/goroutines=8-2 	1	1 ns/op	1.50 delivered-ratio
BenchmarkDegradeRule/scenario=flat-out-one-cpu/goroutines=8-2 	1	1 ns/op	0.95 delivered-ratio
BenchmarkHotPath/mode=single-2 	1	1 ns/op	0.55 cpu-ratio	1.00 off-ratio	1100 fc-cpu-ns/entry	2000 zap-cpu-ns/entry	1100 off-cpu-ns/entry	1000 delivered	1000 off-delivered	0 lost	0 rejected	10 off-rejected
BenchmarkHotPath/mode=single-2 	1	1 ns/op	0.58 cpu-ratio	1.02 off-ratio	1160 fc-cpu-ns/entry	2000 zap-cpu-ns/entry	1137 off-cpu-ns/entry	1000 delivered	1000 off-delivered	0 lost	0 rejected	0 off-rejected
BenchmarkHotPath/mode=single-2 	1	1 ns/op	0.62 cpu-ratio	1.10 off-ratio	1240 fc-cpu-ns/entry	2000 zap-cpu-ns/entry	1127 off-cpu-ns/entry	1000 delivered	1000 off-delivered	0 lost	0 rejected	20 off-rejected
BenchmarkHotPath/mode=parallel-2 	1	1 ns/op	0.50 cpu-ratio	1000 fc-cpu-ns/entry	2000 zap-cpu-ns/entry	1000 delivered	1 lost	10 rejected
`
	const enc = `BenchmarkEncodeEntry 	1000	340 ns/op	0 B/op	0 allocs/op
BenchmarkZapJSONEncodeEntry 	1000	1000 ns/op	0 B/op	0 allocs/op
`
	const tp = `BenchmarkThroughput/goroutines=64/contender=fluentcore 	1000	1 ns/op	700000 events/s	2.1 cpu-s/Mentries
BenchmarkThroughput/goroutines=64/contender=fluentcore-degrade-off 	1000	1 ns/op	800000 events/s	2.0 cpu-s/Mentries
`
	rs := &results{}
	for _, in := range []struct{ label, text string }{{"main", sampleRaw + raw}, {"encoder", enc}, {"throughput", tp}} {
		if err := rs.readFrom(in.label, in.label, strings.NewReader(in.text)); err != nil {
			t.Fatal(err)
		}
	}
	got := (&doc{rs: rs}).targets()
	for _, want := range []string{
		"| AddingFields single, in turns with zap→Discard: client CPU per delivered entry ≤ 0.6 × zap's, 0 lost | 0.58× (1.16 µs vs 2.00 µs an entry; highest 0.62×); lost 0, dropped 0 | **met** |",
		"| AddingFields single, in turns with degrade off: the default's client CPU per delivered entry ≤ 1.05 × degrade off's | 1.02× (1.16 µs vs 1.13 µs an entry); dropped 0 vs 0.99% | **met** |",
		"| AddingFields parallel, in turns with zap→Discard: client CPU per delivered entry ≤ 0.6 × zap's, 0 lost | 0.50× (1.00 µs vs 2.00 µs an entry; highest 0.50×); lost 1 (<0.1%), dropped 0.99% | **not met** |",
		"≤ 1.05 × degrade off's (`cmd/throughput`, flat out) | 1.05× (2.10 µs vs 2.00 µs; 700 k/s vs 800 k/s delivered) | **met** |",
		"≤ 0.5 × zap's JSON encoder's ns, 0 allocations (one CPU) | 0.34× (340 ns vs 1.00 µs); 0 allocs/op | **met** |",
		"a call's client CPU no more | 2.00× the calls per second (700 ns vs 1.40 µs a call); CPU 0.70× (1.40 µs vs 2.00 µs a call); 97.0 % of the info entries dropped | **met** |",
		"on one CPU (GOMAXPROCS 1): degrade off delivers ≥ 0.8 × the default | 0.91× (median of 3 rounds) | **met** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}
