package fluentcore

import (
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
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
