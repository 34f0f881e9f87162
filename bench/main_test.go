package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the receiver process of StartRemote.
func TestMain(m *testing.M) {
	MaybeServe()
	os.Exit(m.Run())
}
