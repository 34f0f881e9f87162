// Package forward is the sending to a receiver: one connection of a stream (Forwarder) —
// the frames it writes, the failures and reconnects, the failover between the stream's
// servers —, its socket and the goroutine that reads it (conn), and its ack window
// (Window). A stream's connections share the servers' health and the addresses of their
// names (internal/dial) and how many of them send (pool). It takes its settings as
// Settings, its time as a zapcore.Clock and its batches as *ring.Batch, and it never
// imports the root package (see ARCHITECTURE.md).
package forward
