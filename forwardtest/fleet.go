package forwardtest

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// NewFleet starts n receivers on one port of 127.0.0.1, 127.0.0.2, ...: the servers behind
// one name that resolves to those addresses. It returns the port and the receivers (the
// i-th on 127.0.0.(i+1)), and registers a tb.Cleanup that closes them. It tries other
// ports while one is taken on an address, and calls tb.Fatalf if it finds none. The
// receivers log nothing unless opts says otherwise. Call it from the test goroutine.
func NewFleet(tb testing.TB, n int, opts ...Option) (string, []*Receiver) {
	tb.Helper()
	at := func(addr string) []Option { return append(append([]Option{WithLogf(nil)}, opts...), WithAddr(addr)) }
	for try := 0; try < 20; try++ {
		first, err := Start(at("127.0.0.1:0")...)
		if err != nil {
			tb.Fatalf("forwardtest: %v", err)
		}
		_, port, err := net.SplitHostPort(strings.TrimPrefix(first.Addr(), "tcp://"))
		if err != nil {
			tb.Fatalf("forwardtest: %v", err)
		}
		rs := []*Receiver{first}
		for i := 2; i <= n; i++ {
			r, err := Start(at(fmt.Sprintf("127.0.0.%d:%s", i, port))...)
			if err != nil {
				break // the port is taken there: another try
			}
			rs = append(rs, r)
		}
		if len(rs) == n {
			tb.Cleanup(func() {
				for _, r := range rs {
					_ = r.Close()
				}
			})
			return port, rs
		}
		for _, r := range rs {
			_ = r.Close()
		}
	}
	tb.Fatalf("forwardtest: no port free on every loopback address")
	return "", nil
}
