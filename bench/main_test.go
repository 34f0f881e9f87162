package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the receiver process of StartRemote, or as the
// CPU-bound neighbour of BenchmarkDegradeRule.
func TestMain(m *testing.M) {
	MaybeServe()
	maybeNeighbour()
	os.Exit(m.Run())
}
