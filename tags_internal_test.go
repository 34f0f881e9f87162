package fluentcore

import (
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// A tagged logger's call allocates nothing either: its tag was resolved in With; a named
// one (TagFromName) looks its name up without allocating, past MaxTags too.
func TestTaggedLoggingCallAllocatesNothing(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(Config{Addr: r.Addr(), TagFromName: true, MaxTags: 2})
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

// The tags' shards: each logger tag writes into one shard of its own while the budget
// allows, and open batches stay at most half the batches.
func TestLoggerTagsHaveShardsOfTheirOwn(t *testing.T) {
	for _, budget := range []int{8 << 20, 1 << 20, 512 << 10} {
		s, _ := resolve(Config{Info: StreamConfig{BufferBytes: budget}})
		st := newStream(infoStream, "app.info", budget, s.stream, newInfoPolicy(s.degrade, nil), newForwarder(s.connFor(infoStream)))
		if len(st.shards) > st.nbatches/2 && len(st.shards) > st.randShards {
			t.Errorf("budget %d: %d shards for %d batches", budget, len(st.shards), st.nbatches)
		}
		seen := map[int]uint16{}
		for idx := uint16(1); idx <= 200; idx++ {
			h := st.homeShard(idx)
			if h < 0 || h >= len(st.shards) {
				t.Fatalf("home %d of tag %d out of %d shards", h, idx, len(st.shards))
			}
			if o, ok := seen[h]; ok && int(idx) <= len(st.shards)-st.randShards {
				t.Errorf("budget %d: tags %d and %d share shard %d", budget, o, idx, h)
			}
			seen[h] = idx
		}
	}
}

func TestTagSettingsFromTheEnvironment(t *testing.T) {
	cfg, err := configFromEnv([]string{"FLUENT_TAG_TEMPLATE={name}.{stream}", "FLUENT_TAG_FROM_NAME=true", "FLUENT_MAX_TAGS=8"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TagTemplate != "{name}.{stream}" || !cfg.TagFromName || cfg.MaxTags != 8 {
		t.Errorf("got %q %v %d", cfg.TagTemplate, cfg.TagFromName, cfg.MaxTags)
	}
}
