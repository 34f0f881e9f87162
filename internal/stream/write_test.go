package stream

import (
	"io"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// scratchBytes is the capacity, in bytes, of each slice an encoder keeps between entries,
// by field path: every slice among its fields, those of the msgpenc types it holds
// included (pointers and interfaces not followed), so that a scratch buffer added to any of
// them is checked too.
func scratchBytes(e *zapenc.Encoder) map[string]int {
	held := map[string]int{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			held[path] = v.Cap() * int(v.Type().Elem().Size())
		}
	}
	walk(reflect.ValueOf(e).Elem(), "Encoder")
	return held
}

// An entry within the entry cap can still grow an encoder's scratch far past its own size
// (sorting a reflected map's keys takes tens of bytes per key); once it is written, no
// shard's encoder keeps more than msgpenc.KeptScratch in any scratch buffer, on either
// stream (the err stream's entries are encoded within a cutting budget).
func TestShardEncodersKeepBoundedScratch(t *testing.T) {
	s := testSettings(1<<20, 1<<20)
	info := newTestStream(s, 16<<20, &testPolicy{}, testForwarders(t, "127.0.0.1:1", 1)[0])
	p, err := NewErrPolicy(SpillSettings{Clock: s.Clock, Enc: s.Enc, BatchBytes: s.BatchBytes, EntryBytes: s.EntryBytes, MaxWait: time.Second, Fallback: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sendDuration := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "send_duration_seconds"})
	errs := New(Err, newTestTags(), 16<<20, s, p, p.Carry, sendDuration, testForwarders(t, "127.0.0.1:1", 1)...)
	ints, anys, strs := map[string]int{}, map[string]any{}, map[string]string{}
	for i := range 5000 {
		k := "k" + strconv.Itoa(i)
		ints[k], anys[k], strs[k] = i, i, k
	}
	for _, f := range []zap.Field{zap.Any("ints", ints), zap.Any("anys", anys), zap.Any("strs", strs)} {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "maps", Time: time.Unix(1, 0)}
		info.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{f})
		ent.Level = zapcore.ErrorLevel
		errs.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{f})
	}
	for _, st := range []*Stream{info, errs} {
		if u := st.Usage(); u.Held != 3 {
			t.Fatalf("%s stream: %d entries held; want the 3 written", st.ID, u.Held)
		}
		for i := range st.shards.all {
			sh := &st.shards.all[i]
			sh.lockForSink()
			for name, n := range scratchBytes(sh.enc) {
				if n > msgpenc.KeptScratch {
					t.Errorf("%s stream, shard %d: %s keeps %d bytes, more than %d", st.ID, i, name, n, msgpenc.KeptScratch)
				}
			}
			sh.unlockForSink()
		}
	}
}
