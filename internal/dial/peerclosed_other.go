//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package dial

import "net"

// PeerCheck would tell whether the peer of a connection has already closed it; this
// platform has no portable non-blocking peek, so it never reports a close, and the
// connection's reader and the write's own error are the only signs of a closed peer.
type PeerCheck struct{}

// NewPeerCheck returns a check that never reports a close.
func NewPeerCheck(net.Conn) *PeerCheck { return &PeerCheck{} }

// Closed returns nil.
func (*PeerCheck) Closed() error { return nil }
