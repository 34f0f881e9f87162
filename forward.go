package fluentcore

import (
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// The sending to a receiver: each stream sends on its forwarders, one per connection
// (internal/forward: the connection, its socket and its ack window, and the servers the
// stream's connections share). This file builds them from the settings.

// ErrHandshake is wrapped by every error of the shared-key handshake: the receiver did not
// send a valid HELO, rejected the PING (wrong shared key, user or password), answered with
// a PONG that does not prove it knows the key, or closed or timed out before PONG; also by
// the error of a receiver that asks for the handshake when Config.Security.SharedKey is not set.
// Test for it with errors.Is on what Sync and Close return. Its messages never contain the
// shared key or the password.
var ErrHandshake = wire.ErrHandshake

// newForwarder returns the forwarder of a stream's only connection.
func newForwarder(s connSettings) *forward.Forwarder { return newForwarders(s, 1)[0] }

// newForwarders returns a stream's forwarders on s: n connections, or with n 0 one per
// server that is not a standby, each address of a name counted once a lookup in the
// background has found them (forward.New). New never waits on that lookup: while it is
// under way, the stream's connections wait for it, not the caller.
func newForwarders(s connSettings, n int) []*forward.Forwarder {
	return forward.New(forward.Settings{
		Clock:            s.clock,
		Endpoints:        s.endpoints,
		Creds:            s.creds,
		AddrErr:          s.addrErr,
		Compression:      s.compression,
		RequireAck:       s.requireAck,
		MaxInflight:      s.maxInflight,
		DialTimeout:      s.dialTimeout,
		HandshakeTimeout: s.handshakeTimeout,
		WriteTimeout:     s.writeTimeout,
		AckTimeout:       s.ackTimeout,
		NewBackoff:       s.newBackoff,
		Resolver:         s.resolver,
		ResolveInterval:  s.resolveInterval,
		SpreadMost:       s.spreadMost,
		Dial:             s.dial,
	}, n)
}
