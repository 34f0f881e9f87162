package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/google/pprof/profile"
)

// cpuShares is the client's CPU, from its CPU profile, split by who spent it.
type cpuShares struct {
	// delivery is the sink's own goroutines: the senders (encoding of the envelope, writes,
	// acks, spill), the ack readers and the clock. It is what the issue calls the sender's
	// CPU: work no logging goroutine waits for.
	delivery int64
	// logging is the logging goroutines' stacks: zap, our Check and Write, and the GC assists
	// their allocations are charged.
	logging int64
	// other is the rest: the runtime's background GC workers, the scheduler, the profiler.
	other int64
}

// The roots of the sink's goroutines. A sample is the sink's if one of these is on its stack.
var deliveryRoots = []string{
	"github.com/fluentcore/fluentcore.(*stream).run",
	"github.com/fluentcore/fluentcore/internal/forward.(*conn).readLoop",
	"github.com/fluentcore/fluentcore.(*sink).clock",
}

// loggingRoot is on the stack of every logging goroutine's samples.
const loggingRoot = "github.com/fluentcore/fluentcore/bench.LogFields"

// profiler is a running CPU profile of this process.
type profiler struct{ buf bytes.Buffer }

// startProfile starts the CPU profiler, at the runtime's 100 samples a second. Its own cost
// is not subtracted: it is part of the client CPU and the throughput every run reports.
func startProfile() (*profiler, error) {
	p := &profiler{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the profile, writes it to path if path is not empty (for go tool pprof), and
// returns its CPU split by owner.
func (p *profiler) stop(path string) (cpuShares, error) {
	pprof.StopCPUProfile()
	if path != "" {
		if err := os.WriteFile(path, p.buf.Bytes(), 0o644); err != nil {
			return cpuShares{}, err
		}
	}
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		return cpuShares{}, err
	}
	return shares(prof)
}

// shares splits a CPU profile's nanoseconds by the owner of each sample's stack.
func shares(prof *profile.Profile) (cpuShares, error) {
	idx := -1
	for i, st := range prof.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return cpuShares{}, fmt.Errorf("profile has no cpu/nanoseconds samples")
	}
	var s cpuShares
	for _, smp := range prof.Sample {
		*s.owner(smp) += smp.Value[idx]
	}
	return s, nil
}

// owner is the share a sample's CPU goes to, by the first root found on its stack.
func (s *cpuShares) owner(smp *profile.Sample) *int64 {
	for _, loc := range smp.Location {
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			if name == loggingRoot {
				return &s.logging
			}
			for _, r := range deliveryRoots {
				if name == r || strings.HasPrefix(name, r+".") {
					return &s.delivery
				}
			}
		}
	}
	return &s.other
}
