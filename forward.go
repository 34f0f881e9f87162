package fluentcore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// maxResponseBytes bounds what a receiver may send us in one message (an ack): a hostile or
// broken peer cannot make the client buffer more than this.
const maxResponseBytes = 512

// parseAddr splits a Config.Addr into a network and an address. Accepted forms:
// "tcp://host:port", "host:port", "tls://host:port" and "unix:///path".
func parseAddr(addr string) (network, address string, useTLS bool, err error) {
	switch {
	case addr == "":
		return "", "", false, errors.New("fluentcore: empty address")
	case strings.HasPrefix(addr, "unix://"):
		path := strings.TrimPrefix(addr, "unix://")
		if path == "" {
			return "", "", false, fmt.Errorf("fluentcore: address %q has no socket path", addr)
		}
		return "unix", path, false, nil
	case strings.HasPrefix(addr, "tls://"):
		address, useTLS = strings.TrimPrefix(addr, "tls://"), true
	case strings.HasPrefix(addr, "tcp://"):
		address = strings.TrimPrefix(addr, "tcp://")
	case strings.Contains(addr, "://"):
		return "", "", false, fmt.Errorf("fluentcore: address %q: scheme must be tcp, tls or unix", addr)
	default:
		address = addr
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", "", false, fmt.Errorf("fluentcore: address %q: %v", addr, err)
	}
	if host == "" || port == "" {
		return "", "", false, fmt.Errorf("fluentcore: address %q needs a host and a port", addr)
	}
	return "tcp", address, useTLS, nil
}

// forwarder is one stream's connection to the receiver. Only the stream's sender goroutine
// calls send; close is called once the sender has stopped.
type forwarder struct {
	s    *settings
	conn *fconn
	hdr  []byte // scratch for the frame header
	opt  []byte // scratch for the option map

	connects  atomic.Uint64 // connections opened
	downSince atomic.Int64  // unix nanos of the first failure since the last success; 0 if none
	readers   sync.WaitGroup
}

func newForwarder(s *settings) *forwarder {
	return &forwarder{s: s, hdr: make([]byte, 0, 64), opt: make([]byte, 0, 96)}
}

// fconn is a connection plus the goroutine that reads from it: acks when they are asked for,
// and otherwise the EOF or reset that tells us the peer is gone before we write into it.
type fconn struct {
	net.Conn
	acks chan string   // ack tokens, in arrival order
	dead chan struct{} // closed by the reader when the connection fails
	err  error         // why; written before dead is closed
}

// send writes one PackedForward frame — [tag, bin(entries), {"size": n, "chunk"?}] — and,
// with RequireAck, waits for its ack. It returns the frame size and whether a new
// connection was opened for it. On any error the connection is closed; the caller retries.
func (f *forwarder) send(ctx context.Context, tag string, entries []byte, n int) (int, bool, error) {
	if f.s.addrErr != nil {
		f.markDown()
		return 0, false, f.s.addrErr
	}
	fresh := false
	if f.conn != nil {
		select {
		case <-f.conn.dead:
			f.dropConn()
		default:
		}
	}
	if f.conn == nil {
		if err := f.dial(ctx); err != nil {
			f.markDown()
			return 0, false, err
		}
		fresh = true
	}
	c := f.conn

	var chunk string
	if f.s.requireAck {
		chunk = newChunkID()
	}
	f.hdr = append(f.hdr[:0], 0x93)
	f.hdr = msgp.AppendString(f.hdr, tag)
	f.hdr = msgp.AppendBytesHeader(f.hdr, uint32(len(entries)))
	f.opt, _ = forwardOptions{Size: n, Chunk: chunk}.MarshalMsg(f.opt[:0]) // cannot fail
	size := len(f.hdr) + len(entries) + len(f.opt)

	// Close aborts a write or an ack wait at once instead of after their deadlines.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	_ = c.SetWriteDeadline(time.Now().Add(f.s.writeTimeout))
	bufs := net.Buffers{f.hdr, entries, f.opt}
	if _, err := bufs.WriteTo(c); err != nil {
		f.dropConn()
		f.markDown()
		return 0, fresh, fmt.Errorf("fluentcore: write to %s: %w", f.s.address, err)
	}
	if chunk != "" {
		if err := f.awaitAck(ctx, c, chunk); err != nil {
			f.dropConn()
			f.markDown()
			return 0, fresh, err
		}
	}
	f.downSince.Store(0)
	return size, fresh, nil
}

func (f *forwarder) awaitAck(ctx context.Context, c *fconn, chunk string) error {
	t := time.NewTimer(f.s.ackTimeout)
	defer t.Stop()
	select {
	case got := <-c.acks:
		if got != chunk {
			return fmt.Errorf("fluentcore: ack from %s does not match the chunk sent", f.s.address)
		}
		return nil
	case <-c.dead:
		return fmt.Errorf("fluentcore: connection to %s lost while waiting for ack: %w", f.s.address, c.err)
	case <-t.C:
		return fmt.Errorf("fluentcore: no ack from %s within %v", f.s.address, f.s.ackTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *forwarder) dial(ctx context.Context) error {
	d := &net.Dialer{Timeout: f.s.dialTimeout, KeepAlive: 30 * time.Second}
	var (
		c   net.Conn
		err error
	)
	if f.s.useTLS {
		td := &tls.Dialer{NetDialer: d, Config: f.s.tlsConfig}
		c, err = td.DialContext(ctx, "tcp", f.s.address)
	} else {
		c, err = d.DialContext(ctx, f.s.network, f.s.address)
	}
	if err != nil {
		return fmt.Errorf("fluentcore: connect to %s: %w", f.s.address, err)
	}
	f.connects.Add(1)
	fc := &fconn{Conn: c, acks: make(chan string, 1), dead: make(chan struct{})}
	f.conn = fc
	f.readers.Add(1)
	go f.readLoop(fc)
	return nil
}

// readLoop reads what the receiver sends: one ack map per frame that asked for one, and
// nothing otherwise. Anything else, or more than maxResponseBytes in one message, ends the
// connection with an error the sender reports.
func (f *forwarder) readLoop(c *fconn) {
	defer f.readers.Done()
	defer close(c.dead)
	buf := make([]byte, maxResponseBytes)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		if err != nil {
			c.err = err
			_ = c.Close()
			return
		}
		n += m
		if !f.s.requireAck {
			c.err = errors.New("receiver sent data the client did not ask for (does it require a shared_key handshake?)")
			_ = c.Close()
			return
		}
		for n > 0 {
			var a ackResponse
			rest, err := a.UnmarshalMsg(buf[:n])
			if errors.Is(err, msgp.ErrShortBytes) {
				if n == len(buf) {
					c.err = fmt.Errorf("ack longer than %d bytes", maxResponseBytes)
					_ = c.Close()
					return
				}
				break
			}
			if err != nil {
				c.err = fmt.Errorf("malformed ack: %v", err)
				_ = c.Close()
				return
			}
			n = copy(buf, buf[n-len(rest):n])
			select {
			case c.acks <- a.Ack:
			default: // an ack nobody waits for: the next wait sees a mismatch if it matters
			}
		}
	}
}

func (f *forwarder) markDown() {
	f.downSince.CompareAndSwap(0, time.Now().UnixNano())
}

// disconnectedFor reports how long sends have been failing (0 while they succeed).
func (f *forwarder) disconnectedFor(now time.Time) time.Duration {
	since := f.downSince.Load()
	if since == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, since))
}

func (f *forwarder) dropConn() {
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// close closes the connection and waits for its reader.
func (f *forwarder) close() {
	f.dropConn()
	f.readers.Wait()
}

// newChunkID returns an ack token: base64 of 16 random bytes, 24 ASCII characters.
func newChunkID() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	return base64.StdEncoding.EncodeToString(id[:])
}
