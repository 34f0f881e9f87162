// Package forwardtest is an in-process Fluent Forward protocol receiver: the server side
// of what fluentcore speaks, for tests (ours and our users'), benchmarks and demos.
//
// A Receiver listens on a loopback TCP port (or a unix socket), accepts any number of
// connections, and decodes requests in all four carrier modes (Message, Forward,
// PackedForward, CompressedPackedForward with one or more gzip members). It is as strict
// as fluentd and fluent-bit together: anything either of them would reject (a float or
// negative time, a non-str tag or chunk, an extension inside a record, a request over
// fluent-bit's 6144000-byte limit, a nil request, malformed msgpack, ...) is recorded as a
// violation, the request is neither stored nor acked, and the connection is closed, as
// fluent-bit does. NewReceiver fails the test with every violation at cleanup. A request
// whose option map has "chunk" is answered with {"ack": chunk} once its entries are stored.
//
// It is independent of the fluentcore client: it decodes with tinylib/msgp primitives and
// never registers a msgpack extension, so it can share a binary with other fluentd clients.
//
// Typical use in a test:
//
//	func TestOrderLogged(t *testing.T) {
//		recv := forwardtest.NewReceiver(t) // closed, and violations reported, at cleanup
//		core := fluentcore.New(fluentcore.Config{Addr: recv.Addr(), Tag: "shop"})
//		zap.New(core).Info("order placed", zap.String("id", "42"))
//		if err := core.Close(); err != nil {
//			t.Fatal(err)
//		}
//		entries, err := recv.WaitForEntries(1, 5*time.Second)
//		if err != nil {
//			t.Fatal(err)
//		}
//		if got := entries[0].Record["id"]; got != "42" {
//			t.Errorf("id = %v, want 42", got)
//		}
//	}
//
// It also plays the receiver side of the rest of the protocol: the shared_key handshake
// with users (WithSharedKey, WithUsers, WithHostname; HELO in fluentd's form or, with
// WithHELOStr, fluent-bit's), TLS (WithTLS, WithTLS12Only, and NewTLSCert for a throwaway
// CA with server and client certificates), unix sockets (WithAddr), and deny_keepalive
// (DenyKeepalive).
//
// Fault injection, switchable while the receiver runs so a test can break it and heal it:
// Stall stops reading (the client's writes then block once kernel buffers fill) until
// Resume, and Allow lets a stalled receiver read so many requests more (a test that
// delivers frame by frame, on a clock of its own); SetCloseAfter closes connections after
// n bytes; SetRefuse refuses new connections; CloseConnections drops the open ones;
// SetAckFault withholds, corrupts or doubles acks; SetPongFault answers a valid PING with a
// wrong digest, a rejection or nothing.
// Close drops every connection for good. Slow receivers: WithReadRate limits the entries
// read a second over all connections, WithConnReadRate on each connection (fluentd's
// workers behind one port), and WithAckDelay acks each request after a round trip;
// WithReadBuffer fixes what the kernel holds in front of them, which it otherwise sizes by
// a timing that differs from run to run.
// Benchmarks use CountOnly, which counts entries without decoding records.
package forwardtest
