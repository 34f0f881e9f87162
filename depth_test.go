package fluentcore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// deepObj is an ObjectMarshaler n maps deep, {"level": n, "next": {...}}; deepArr an
// ArrayMarshaler n arrays deep, [n, [n-1, [...]]]. Each returns its child's error.
type (
	deepObj int
	deepArr int
)

func (n deepObj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt("level", int(n))
	if n > 1 {
		return enc.AddObject("next", n-1)
	}
	return nil
}

func (n deepArr) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendInt(int(n))
	if n > 1 {
		return enc.AppendArray(n - 1)
	}
	return nil
}

// An entry nested far deeper than any receiver reads, logged among ordinary ones, is cut
// at the cap with a visible marker and delivered, and so is every entry in its frame:
// none is lost to a frame the receiver refuses.
func TestDeeplyNestedEntryIsDeliveredWithItsFrame(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, quiet)
	logger := zap.New(core)
	const plain = 400
	for i := range plain {
		logger.Info("plain", zap.Int("i", i))
		if i == plain/2 {
			logger.Info("deep", zap.Object("obj", deepObj(1500)), zap.Array("arr", deepArr(1500)), zap.Int("after", 1))
		}
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(plain+1, 5*time.Second)
	if err != nil {
		t.Fatalf("%v (receiver: %+v, violations %v)", err, r.Stats(), r.Violations())
	}
	if st := core.Stats().Info; st.Delivered != plain+1 || st.DroppedTotal() != 0 {
		t.Errorf("delivered %d, dropped %v; want %d, none", st.Delivered, st.Dropped, plain+1)
	}
	var deep map[string]any
	for _, e := range got {
		if e.Record["msg"] == "deep" {
			deep = e.Record
		}
	}
	if deep == nil {
		t.Fatal("the deep entry did not arrive")
	}
	if deep["after"] != int64(1) {
		t.Errorf("after = %v: the rest of the entry was lost", deep["after"])
	}
	for _, c := range []struct {
		key  string
		down func(any) any
	}{
		{"obj", func(v any) any { return v.(map[string]any)["next"] }},
		{"arr", func(v any) any { return v.([]any)[1] }},
	} {
		v := deep[c.key]
		for range fluentcore.MaxDepth {
			v = c.down(v)
		}
		if v != fluentcore.TooDeepMarker {
			t.Errorf("%s: below %d levels %#v, want the marker %q", c.key, fluentcore.MaxDepth, v, fluentcore.TooDeepMarker)
		}
		if e, _ := deep[c.key+"Error"].(string); !strings.Contains(e, fmt.Sprintf("deeper than %d", fluentcore.MaxDepth)) {
			t.Errorf("%sError = %q, want the cap named", c.key, e)
		}
	}
}
