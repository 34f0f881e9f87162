package stream

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
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
// shard's encoder keeps more than msgpenc.KeptScratch in any scratch buffer.
func TestShardEncodersKeepBoundedScratch(t *testing.T) {
	st := newTestStream(testSettings(1<<20, 1<<20), 16<<20, testPolicy{}, testForwarders(t, "127.0.0.1:1", 1)[0])
	ints, anys, strs := map[string]int{}, map[string]any{}, map[string]string{}
	for i := range 5000 {
		k := "k" + strconv.Itoa(i)
		ints[k], anys[k], strs[k] = i, i, k
	}
	for _, f := range []zap.Field{zap.Any("ints", ints), zap.Any("anys", anys), zap.Any("strs", strs)} {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "maps", Time: time.Unix(1, 0)}
		st.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{f})
	}
	if u := st.Usage(); u.Held != 3 {
		t.Fatalf("%d entries held; want the 3 written", u.Held)
	}
	for i := range st.shards.all {
		sh := &st.shards.all[i]
		sh.lockForSink()
		for name, n := range scratchBytes(sh.enc) {
			if n > msgpenc.KeptScratch {
				t.Errorf("shard %d: %s keeps %d bytes, more than %d", i, name, n, msgpenc.KeptScratch)
			}
		}
		sh.unlockForSink()
	}
}
