package fluentcore

import (
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/ring"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A tagged logger's call allocates nothing either: its tag was resolved in With; a named
// one (Tags.FromName) looks its name up without allocating, past Tags.Max too.
func TestTaggedLoggingCallAllocatesNothing(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(Config{Addr: r.Addr(), Tags: TagsConfig{FromName: true, Max: 2}})
	defer core.Close()
	logger := zap.New(core)
	fields := []zap.Field{zap.String("user", "alice"), zap.Int("n", 1)}
	for name, l := range map[string]*zap.Logger{
		"option":          logger.With(Tag("audit")),
		"name":            logger.Named("access"),
		"name past cap":   logger.Named("a").Named("b").Named("c"),
		"option past cap": logger.With(Tag("x")).With(Tag("y")).With(Tag("z")),
	} {
		l.Info("warm up", fields...)
		l.Error("warm up", fields...)
		if n := steadyAllocs(100, func() { l.Info("order placed", fields...) }); n != 0 {
			t.Errorf("%s: an info call allocates %v times", name, n)
		}
		if n := steadyAllocs(100, func() { l.Error("order failed", fields...) }); n != 0 {
			t.Errorf("%s: an err call allocates %v times", name, n)
		}
	}
}

func TestTagSettingsFromTheEnvironment(t *testing.T) {
	cfg, err := configFromEnv([]string{"FLUENT_TAGS_TEMPLATE={name}.{stream}", "FLUENT_TAGS_FROM_NAME=true", "FLUENT_TAGS_MAX=8"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tags.Template != "{name}.{stream}" || !cfg.Tags.FromName || cfg.Tags.Max != 8 {
		t.Errorf("got %q %v %d", cfg.Tags.Template, cfg.Tags.FromName, cfg.Tags.Max)
	}
}

// A tag that holds two batches or more leaves the last free ones to the tags that hold
// one: a flood cannot take the batch a rare tag needs next.
func TestAFloodingTagLeavesTheLastBatchesToTheOthers(t *testing.T) {
	s, _ := resolve(Config{})
	st := newTestStream(s, 8<<20, newInfoPolicy(s.degrade, s.clock, nil, nil), newForwarder(s.connFor(infoStream)))
	flood, rare := st.tags.Lookup("flood").Idx, st.tags.Lookup("rare").Idx
	take := func(tag uint16) *ring.Batch {
		if !st.mayTake(&zapcore.Entry{Message: "m"}, tag) {
			return nil
		}
		b := st.ring.Take(nil)
		if b != nil {
			st.floors.claim(b, tag)
		}
		return b
	}
	if take(rare) == nil {
		t.Fatal("the rare tag's first batch")
	}
	var flooded []*ring.Batch
	for b := take(flood); b != nil; b = take(flood) {
		flooded = append(flooded, b)
	}
	// Two tags hold batches, one of them one: the reserve is nb/8 (4 of 32).
	nb := len(st.ring.Batches())
	if left := st.ring.Free(); left != nb/8 || len(flooded) != nb-1-left {
		t.Fatalf("the flood took %d of %d batches and left %d", len(flooded), nb, left)
	}
	if take(rare) == nil {
		t.Fatal("the rare tag found no batch the flood left")
	}
	if take(rare) != nil {
		t.Fatal("the rare tag, now with two batches, took a third from the reserve")
	}
	st.ring.Finish(flooded[0])
	if st.ring.Free() != nb/8 || take(flood) != nil {
		t.Fatal("the flood took a batch of the reserve")
	}
	if n := st.floors.held[flood].Load(); n != int32(len(flooded)-1) {
		t.Errorf("the flood holds %d batches, counted %d", len(flooded)-1, n)
	}
}
