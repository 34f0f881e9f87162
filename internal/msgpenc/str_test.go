package msgpenc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// badUTF8 has a lone byte, a bad continuation and an encoded surrogate.
const badUTF8 = "a\xffb\xc3(c\xed\xa0\x80d"

// AppendStr and AppendStrBytes write what msgp writes for valid UTF-8, with the smallest
// header; invalid UTF-8 bytes become U+FFFD, one per byte, as zap's JSON encoder writes them.
func TestAppendStr(t *testing.T) {
	for _, n := range []int{0, 7, 8, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		want := msgp.AppendString([]byte{0xc0}, s)
		if got := AppendStr([]byte{0xc0}, s); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: % x…, want % x…", len(s), got[:min(len(got), 6)], want[:min(len(want), 6)])
		}
		if got := AppendStrBytes([]byte{0xc0}, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("%d bytes from []byte: % x…, want % x…", len(s), got[:min(len(got), 6)], want[:min(len(want), 6)])
		}
	}
	repaired := "a\uFFFDb\uFFFD(c\uFFFD\uFFFD\uFFFDd"
	for _, s := range []string{badUTF8, strings.Repeat(badUTF8, 10)} {
		want := msgp.AppendString(nil, strings.Repeat(repaired, len(s)/len(badUTF8)))
		if got := AppendStr(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
		if got := AppendStrBytes(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("%q from []byte: %q, want %q", s, got, want)
		}
	}
}

// The ASCII checks read words, a short tail as the last word, which overlaps those read
// already: every length and every position of a byte >= 0x80 gives the answer of a
// byte-by-byte check, and AppendStr of such a string repairs it as for any other, whether
// dst has room for it (the fast path, which copies as it checks, into capacity that holds
// old bytes) or must grow.
func TestASCIICheckReadsEveryByte(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c >= 0x80 {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 40; n++ {
		for high := -1; high < n; high++ {
			s := bytes.Repeat([]byte{'a'}, n)
			if high >= 0 {
				s[high] = 0xff
			}
			if got, want := isASCII(s), naive(s); got != want {
				t.Fatalf("isASCII(%q) = %v, want %v", s, got, want)
			}
			want := msgp.AppendString([]byte{0xc0}, strings.ToValidUTF8(string(s), "\uFFFD"))
			roomy := append(make([]byte, 0, 128), 0xc0)
			copy(roomy[1:cap(roomy)], bytes.Repeat([]byte{0xee}, cap(roomy)))
			for _, dst := range [][]byte{{0xc0}, roomy} {
				if got := AppendStr(dst, string(s)); !bytes.Equal(got, want) {
					t.Fatalf("AppendStr(%q) into cap %d = %x, want %x", s, cap(dst), got, want)
				}
			}
		}
	}
}
