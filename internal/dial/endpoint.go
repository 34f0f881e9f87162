package dial

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ParseAddr splits an address into a network and an address to dial. Accepted forms:
// "tcp://host:port", "host:port", "tls://host:port" and "unix:///path". The error names
// the address and what is wrong with it.
func ParseAddr(addr string) (network, address string, useTLS bool, err error) {
	switch {
	case addr == "":
		return "", "", false, errors.New("fluentcore: empty address")
	case strings.TrimSpace(addr) != addr:
		return "", "", false, spacesError(addr)
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
		return "", "", false, fmt.Errorf("fluentcore: address %q: scheme must be tcp, tls, unix or srv (tcp://host:port, host:port, tls://host:port, unix:///path, srv://_service._proto.name)", addr)
	default:
		address = addr
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", "", false, fmt.Errorf("fluentcore: address %q: %w", addr, err)
	}
	if host == "" || port == "" {
		return "", "", false, fmt.Errorf("fluentcore: address %q needs a host and a port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", false, fmt.Errorf("fluentcore: address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return "tcp", address, useTLS, nil
}

// spacesError is the error for an address with white space before or after it, which is
// neither trimmed (it may be a typo for something else) nor read as a scheme.
func spacesError(addr string) error {
	return fmt.Errorf("fluentcore: address %q has leading or trailing spaces", addr)
}

// Endpoint is one receiver, parsed once and read-only afterwards.
type Endpoint struct {
	Addr             string      // as configured, for messages
	Network, Address string      // as configured; a host name in Address is looked up through the Resolver (Dial, Track)
	TLS              *tls.Config // nil without TLS; per endpoint: ServerName comes from its own address
	Weight           int
	Standby          bool
	// First and Slots place the endpoint among those Expand returns: a server given by a
	// host name has Slots places from First, one per address it may have; any other has 1.
	First, Slots int
	host, port   string // a name's, for its lookups
	srv          bool   // Address is an SRV name: its targets are the servers, and it is never dialed
}

// NewEndpoint parses one server. weight is its share of new connections (see Balancer);
// tlsBase is the configured TLS (nil for the defaults: system roots, TLS 1.2 or later),
// cloned and given the address's host as ServerName when it has none. A malformed address or a negative weight
// is an error; the endpoint is returned all the same, for messages.
func NewEndpoint(addr string, weight int, standby bool, tlsBase *tls.Config) (Endpoint, error) {
	ep := Endpoint{Addr: addr, Weight: weight, Standby: standby}
	if strings.TrimSpace(addr) != addr {
		return ep, spacesError(addr)
	}
	if name, ok := strings.CutPrefix(addr, "srv://"); ok {
		// DNS SRV discovery: the servers are the name's SRV targets (Expand, Track).
		if name == "" || strings.ContainsAny(name, ":/") {
			return ep, fmt.Errorf("fluentcore: address %q: want srv://_service._proto.name, without a port", addr)
		}
		if weight < 0 {
			return ep, fmt.Errorf("fluentcore: server %q: negative weight %d", addr, weight)
		}
		ep.Network, ep.Address, ep.srv = "tcp", name, true
		return ep, nil
	}
	network, address, useTLS, err := ParseAddr(addr)
	if err != nil {
		return ep, err
	}
	ep.Network, ep.Address = network, address
	if weight < 0 {
		return ep, fmt.Errorf("fluentcore: server %q: negative weight %d", addr, weight)
	}
	if useTLS {
		if tlsBase != nil {
			ep.TLS = tlsBase.Clone()
		} else {
			ep.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if ep.TLS.ServerName == "" {
			host, _, _ := net.SplitHostPort(ep.Address)
			ep.TLS.ServerName = host
		}
	}
	return ep, nil
}

// Func opens a transport connection, as net.Dialer.DialContext does.
type Func func(ctx context.Context, network, address string) (net.Conn, error)

// Dial opens a connection to ep within ctx, at target (one of its name's addresses, from
// Balancer.Target; "" for ep.Address): the transport, then TLS if ep has it, which verifies
// the name as configured whatever the address. A target whose host is a name — ep's own
// before a lookup gave its addresses, an SRV target — is looked up through r
// (net.DefaultResolver if nil) and its addresses are tried in turn, each within an equal
// share of the time ctx has left: dial is given IP addresses and unix socket paths only,
// never a name. conn is the top layer (TLS's, when there is one), raw the socket under it.
// The error names the address (and the one dialed, when it differs); nothing is left open
// when there is one. Safe for concurrent use if dial and r are.
func Dial(ctx context.Context, dial Func, r Resolver, ep *Endpoint, target string) (conn, raw net.Conn, err error) {
	if target == "" {
		target = ep.Address
	}
	addrs := []string{target}
	if ep.Network == "tcp" {
		host, port, err := net.SplitHostPort(target)
		if err == nil {
			addrs, err = addresses(ctx, r, host, port)
		}
		if err != nil && target != ep.Address {
			return nil, nil, fmt.Errorf("fluentcore: connect to %s (%s): %w", ep.Addr, target, err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("fluentcore: connect to %s: %w", ep.Addr, err)
		}
	}
	raw, err = dialEach(ctx, dial, ep, addrs)
	if err != nil {
		return nil, nil, err
	}
	if ep.TLS == nil {
		return raw, raw, nil
	}
	tc := tls.Client(raw, ep.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("fluentcore: connect to %s: TLS handshake: %w", ep.Addr, err)
	}
	return tc, raw, nil
}

// dialEach dials ep's addrs in turn until one answers, each within an equal share of the
// time ctx has left (the last within all of it), and returns the first error if none does.
func dialEach(ctx context.Context, dial Func, ep *Endpoint, addrs []string) (net.Conn, error) {
	var first error
	for i, addr := range addrs {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && i < len(addrs)-1 {
			actx, cancel = context.WithTimeout(ctx, time.Until(deadline)/time.Duration(len(addrs)-i))
		}
		c, err := dial(actx, ep.Network, addr)
		cancel()
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = fmt.Errorf("fluentcore: connect to %s: %w", ep.Addr, err)
			if addr != ep.Address {
				first = fmt.Errorf("fluentcore: connect to %s (%s): %w", ep.Addr, addr, err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}
