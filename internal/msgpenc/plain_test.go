package msgpenc

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// TestPlainValue: every kind of msgpack value passes, whole; no prefix of it does, nor an
// extension, a str with invalid UTF-8, or trailing bytes.
func TestPlainValue(t *testing.T) {
	var b []byte
	b = msgp.AppendArrayHeader(b, 21)
	b = msgp.AppendNil(b)
	b = msgp.AppendBool(msgp.AppendBool(b, true), false)
	for _, i := range []int64{0, 127, -32, -33, 200, -200, 40000, -40000, 1 << 40, -(1 << 40)} {
		b = msgp.AppendInt64(b, i)
	}
	b = msgp.AppendUint64(b, math.MaxUint64)
	b = msgp.AppendFloat32(msgp.AppendFloat64(b, 1.5), 2.5)
	b = msgp.AppendString(b, "short é")
	b = msgp.AppendString(b, strings.Repeat("s", 300))
	b = msgp.AppendBytes(b, bytes.Repeat([]byte{0xff}, 70000))
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(msgp.AppendString(b, "k"), "v")
	b = msgp.AppendString(b, "a")
	b = msgp.AppendArrayHeader(b, 20)
	for range 20 {
		b = msgp.AppendMapHeader(b, 0)
	}
	b = msgp.AppendBytes(b, nil)
	if rest, err := msgp.Skip(b); err != nil || len(rest) != 0 {
		t.Fatalf("test value itself is bad: %v, %d left", err, len(rest))
	}
	if !plainValue(b, 0) {
		t.Fatal("a plain value was refused")
	}
	for i := range b {
		if plainValue(b[:i], 0) {
			t.Fatalf("the %d-byte prefix passed", i)
		}
	}
	if plainValue(append(append([]byte(nil), b...), 0xc0), 0) {
		t.Error("trailing bytes passed")
	}
	// Nesting up to the cap passes, counted from the depth the value starts at; one more
	// level, even an empty one, does not.
	nested := func(n int) []byte {
		var v []byte
		for i := range n {
			if i%2 == 0 {
				v = msgp.AppendNil(msgp.AppendArrayHeader(v, 2)) // [nil, the rest]
				continue
			}
			v = msgp.AppendString(msgp.AppendMapHeader(v, 1), "k") // {"k": the rest}
		}
		return v
	}
	for _, start := range []int{0, 1, MaxDepth / 2, MaxDepth} {
		fits := msgp.AppendNil(nested(MaxDepth - start))
		if !plainValue(fits, start) {
			t.Errorf("%d levels from depth %d refused", MaxDepth-start, start)
		}
		if over := msgp.AppendArrayHeader(nested(MaxDepth-start), 0); plainValue(over, start) {
			t.Errorf("%d levels from depth %d passed", MaxDepth-start+1, start)
		}
	}
	bad := [][]byte{
		msgp.AppendString(nil, "\xff"),
		wire.AppendEventTime(msgp.AppendArrayHeader(nil, 1), 1, 2),
		msgp.AppendComplex64(nil, 1i),
		{0xc1},
		msgp.AppendMapHeader(nil, 1<<31),
	}
	for _, v := range bad {
		if plainValue(v, 0) {
			t.Errorf("% x passed", v)
		}
	}
}
