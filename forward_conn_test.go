package fluentcore_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// Tests of one connection (forward_conn.go) against a receiver: how it is closed.

// Close shuts healthy TLS connections down with close_notify, every time: a receiver that
// sees the socket close without it logs an error for each Close (fluentd: "SSL_read:
// unexpected eof"). The receiver here speaks TLS 1.2, fluentd's default, whose records carry
// their type in the clear, and records whether the last one before EOF was an alert.
func TestCloseSendsTLSCloseNotify(t *testing.T) {
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := cert.ServerConfig()
	srv.MaxVersion = tls.VersionTLS12
	ended := make(chan bool, 4) // per connection: its last record was an alert (close_notify)
	var served sync.WaitGroup   // the accept loop and every connection's reader
	defer func() {
		_ = ln.Close()
		served.Wait()
	}()
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1) // while the loop's own count holds the group above zero
			go func() {
				defer served.Done()
				tap := &recordTap{Conn: nc}
				tc := tls.Server(tap, srv)
				_, _ = io.Copy(io.Discard, tc)
				_ = nc.Close()
				ended <- tap.last == 21 // TLS content type alert
			}()
		}
	}()
	const rounds = 20
	missing := 0
	for range rounds {
		// The tap reads and never acks: the err stream asks for none.
		core := fluentcore.New(fluentcore.Config{Addr: "tls://" + ln.Addr().String(), Security: fluentcore.SecurityConfig{TLS: cert.ClientConfig()}, Err: fluentcore.ErrConfig{Acks: fluentcore.AcksOff}})
		logger := zap.New(core)
		logger.Info("to the info connection")
		logger.Error("to the err connection")
		if err := core.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := core.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case ok := <-ended:
				if !ok {
					missing++
				}
			case <-time.After(waitFor):
				t.Fatal("a connection was not closed by Close")
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d connections closed without close_notify", missing, 2*rounds)
	}
}

// recordTap follows the TLS records read through it and keeps the type of the last one.
type recordTap struct {
	net.Conn
	hdr  [5]byte // type, version (2), length (2)
	nhdr int
	skip int // bytes of the current record's payload still to come
	last byte
}

func (r *recordTap) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if r.skip > 0 {
			k := min(r.skip, len(b))
			r.skip, b = r.skip-k, b[k:]
			continue
		}
		r.hdr[r.nhdr], r.nhdr, b = b[0], r.nhdr+1, b[1:]
		if r.nhdr == len(r.hdr) {
			r.last, r.skip, r.nhdr = r.hdr[0], int(r.hdr[3])<<8|int(r.hdr[4]), 0
		}
	}
	return n, err
}
