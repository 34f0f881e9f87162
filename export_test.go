package fluentcore

import "testing"

// Test helpers shared with the external test package (core_test.go): the conformance
// normalisation of encoder_msgp_test.go, so both compare records to zap's JSON one way.
var (
	NormMsgp   = normMsgp
	NormJSON   = normJSON
	DiffValues = diff
	WaitUntil  = waitUntil
	// IdentityHolds checks entries = delivered + spilled + dropped for both streams.
	IdentityHolds = identityHolds
)

// steadyAllocs returns the allocations per call of f, as the least of three
// testing.AllocsPerRun measurements. AllocsPerRun counts every allocation in the process,
// so a goroutine of an earlier test winding down can add one to a single measurement; an
// allocation f itself makes shows up in all three.
func steadyAllocs(runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for i := 0; i < 2 && least > 0; i++ {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
