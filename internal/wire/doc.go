// Package wire is the Fluent Forward protocol as bytes: the fixed message shapes (EventTime,
// the option map, ack, PING and PONG, with msgp-generated code), the one builder of a
// PackedForward frame header, the checks a frame read back must pass, the shared-key
// handshake, the ack reader, and the msgpack type bytes written by hand.
//
// It knows nothing of zap, streams or configuration, and imports no other fluentcore
// package; see ARCHITECTURE.md for where it sits.
package wire
