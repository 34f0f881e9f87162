// Package testkit holds the helpers the tests of several fluentcore packages share. Only
// tests import it.
package testkit

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// SteadyAllocs returns the allocations per call of f, as the least of three
// testing.AllocsPerRun measurements. AllocsPerRun counts every allocation in the process,
// so a goroutine of an earlier test winding down can add one to a single measurement; an
// allocation f itself makes shows up in all three.
func SteadyAllocs(runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for i := 0; i < 2 && least > 0; i++ {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}

// WaitUntil polls cond every millisecond and fails the test if it is not true within 20 s.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Entries returns n encoded Forward entries, [EventTime, {"i": i, "msg": msg}], written with
// msgp's own extension encoder: an independent check of the hand-written EventTime.
func Entries(n int, msg string) []byte {
	var b []byte
	for i := range n {
		b = msgp.AppendArrayHeader(b, 2)
		b, _ = msgp.AppendExtension(b, &EventTime{Sec: 1_700_000_000, Nsec: uint32(i)}) // cannot fail
		b = msgp.AppendMapHeader(b, 2)
		b = msgp.AppendInt(msgp.AppendString(b, "i"), i)
		b = msgp.AppendString(msgp.AppendString(b, "msg"), msg)
	}
	return b
}

// EventTime is the Forward EventTime as a msgp.Extension (type 0, 8 bytes, big-endian
// seconds then nanoseconds), written independently of internal/wire so tests can check
// one against the other. Pass it to msgp.AppendExtension; never register it.
type EventTime struct{ Sec, Nsec uint32 }

// ExtensionType implements msgp.Extension.
func (t *EventTime) ExtensionType() int8 { return 0 }

// Len implements msgp.Extension.
func (t *EventTime) Len() int { return 8 }

// MarshalBinaryTo implements msgp.Extension.
func (t *EventTime) MarshalBinaryTo(b []byte) error {
	binary.BigEndian.PutUint32(b, t.Sec)
	binary.BigEndian.PutUint32(b[4:], t.Nsec)
	return nil
}

// UnmarshalBinary implements msgp.Extension; a payload that is not 8 bytes is an error.
func (t *EventTime) UnmarshalBinary(b []byte) error {
	if len(b) != 8 {
		return errors.New("bad length")
	}
	t.Sec, t.Nsec = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	return nil
}

// HELO encodes a receiver's HELO; nonce and auth are written as bin (fluentd) unless asStr
// (fluent-bit), then extra key-value pairs.
func HELO(nonce, auth []byte, asStr bool, extra ...any) []byte {
	b := msgp.AppendArrayHeader(nil, 2)
	b = msgp.AppendString(b, "HELO")
	b = msgp.AppendMapHeader(b, uint32(2+len(extra)/2))
	for _, kv := range [][2]any{{"nonce", nonce}, {"auth", auth}} {
		b = msgp.AppendString(b, kv[0].(string))
		if asStr {
			b = msgp.AppendStringFromBytes(b, kv[1].([]byte))
		} else {
			b = msgp.AppendBytes(b, kv[1].([]byte))
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		var err error
		if b, err = msgp.AppendIntf(b, extra[i]); err != nil {
			panic(err)
		}
		if b, err = msgp.AppendIntf(b, extra[i+1]); err != nil {
			panic(err)
		}
	}
	return b
}

// PONG encodes a receiver's PONG: ["PONG", ok, reason, hostname, digest].
func PONG(ok bool, reason, hostname, digest string) []byte {
	b := msgp.AppendArrayHeader(nil, 5)
	b = msgp.AppendString(b, "PONG")
	b = msgp.AppendBool(b, ok)
	for _, s := range []string{reason, hostname, digest} {
		b = msgp.AppendString(b, s)
	}
	return b
}
