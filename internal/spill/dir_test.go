package spill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// A batch of several entries becomes one JSON line per entry in Spill.Fallback.
func TestJSONFallbackWritesOneLinePerEntry(t *testing.T) {
	var fb testkit.Lines
	j := NewJSONWriter(&fb)
	if err := j.Append("shop.err", testkit.Entries(3, "m"), 3); err != nil {
		t.Fatal(err)
	}
	if fb.Count() != 3 {
		t.Fatalf("%d lines for 3 entries", fb.Count())
	}
}

// Each frame the spill reads back is checked as strictly as a receiver checks it.
func TestSpillReadFrameRejectsWhatReceiversReject(t *testing.T) {
	good := testkit.Entries(2, "m")
	frame := func(tag string, entries []byte, opts string) []byte {
		b := []byte{0x93}
		b = append(b, byte(0xa0|len(tag)))
		b = append(b, tag...)
		b = append(b, 0xc4, byte(len(entries)))
		b = append(b, entries...)
		return append(b, opts...)
	}
	size2 := "\x81\xa4size\x02"
	cases := []struct {
		name string
		data []byte
		want string // "" means valid
	}{
		{"valid", frame("t", good, size2), ""},
		{"size mismatch", frame("t", good, "\x81\xa4size\x03"), "size says 3"},
		{"no size", frame("t", good, "\x80"), "size"},
		{"chunk", frame("t", good, "\x82\xa4size\x02\xa5chunk\xa1x"), "chunk"},
		{"not an array", append([]byte{0x92}, frame("t", good, size2)[1:]...), "3-element"},
		{"int tag", append([]byte{0x93, 0x01}, frame("t", good, size2)[3:]...), "not a str"},
		{"truncated", frame("t", good, size2)[:20], "truncated"},
		{"ext in record", frame("t", []byte("\x92\xd7\x00\x00\x00\x00\x01\x00\x00\x00\x00\x81\xa1k\xd4\x05\x00"), "\x81\xa4size\x01"), "type"},
		{"float time", frame("t", []byte("\x92\xcb\x00\x00\x00\x00\x00\x00\x00\x00\x80"), "\x81\xa4size\x01"), "time"},
		{"int key", frame("t", []byte("\x92\xd7\x00\x00\x00\x00\x01\x00\x00\x00\x00\x81\x01\x01"), "\x81\xa4size\x01"), "key"},
	}
	for _, c := range cases {
		name := filepath.Join(t.TempDir(), "seg")
		if err := os.WriteFile(name, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		d := &Dir{rf: f}
		fr, err := d.readFrame(int64(len(c.data)))
		f.Close()
		switch {
		case c.want == "" && (err != nil || fr.N != 2 || fr.Tag != "t" || fr.size != int64(len(c.data))):
			t.Errorf("%s: %+v, %v", c.name, fr, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// BenchmarkSpillAppend measures one append to the spill — what moving a sealed err batch
// (256 KiB, the default Transport.MaxBatchBytes) or one overflowing err entry to disk costs — with
// the fsync every append gets ("fsync") and without it ("nosync", for comparison only).
func BenchmarkSpillAppend(b *testing.B) {
	entry := testkit.Entries(1, "m")
	var batch []byte
	for i := 0; len(batch) < 256<<10-len(entry); i++ {
		batch = append(batch, entry...)
	}
	for _, size := range []struct {
		name    string
		entries []byte
	}{{"entry", entry}, {"batch256KiB", batch}} {
		for _, sync := range []bool{true, false} {
			name := size.name + "/nosync"
			if sync {
				name = size.name + "/fsync"
			}
			b.Run(name, func(b *testing.B) {
				d, err := Open(b.TempDir(), 64<<20, 256<<10, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				d.noSync = !sync
				n := len(size.entries) / len(entry)
				b.SetBytes(int64(len(size.entries)))
				b.ResetTimer()
				for range b.N {
					err := d.Append("shop.err", size.entries, n)
					if errors.Is(err, ErrFull) {
						b.StopTimer()
						discardSegments(b, d)
						b.StartTimer()
						err = d.Append("shop.err", size.entries, n)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// discardSegments deletes every segment of d, as if all were delivered.
func discardSegments(tb testing.TB, d *Dir) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeWriterLocked()
	for _, seg := range d.segs {
		if err := os.Remove(d.path(seg.seq)); err != nil {
			tb.Fatal(err)
		}
	}
	d.segs = nil
	d.bytes.Store(0)
}
