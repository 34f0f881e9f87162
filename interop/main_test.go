package interop

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (the cores' senders, the
// taps, the readers of the peers' output), after removing the built receiver binaries.
func TestMain(m *testing.M) {
	code := m.Run()
	removeBuilds()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
