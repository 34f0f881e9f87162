package fluentcore

import (
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// After Close, info entries are counted as closed and err entries go to the fallback.
func TestWritesAfterClose(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb testkit.Lines
	core := New(Config{Addr: r.Addr(), ErrFallback: &fb})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	logger := zap.New(core)
	logger.Info("late")
	logger.Error("late error")
	st := core.Stats()
	if st.Info.Dropped["closed"] != 1 || st.Err.Spilled != 1 || fb.Count() != 1 {
		t.Fatalf("info closed=%d err spilled=%d fallback lines=%d", st.Info.Dropped["closed"], st.Err.Spilled, fb.Count())
	}
	identityHolds(t, st)
}
