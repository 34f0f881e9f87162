package dial

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resolver looks a host name up, as *net.Resolver does (net.DefaultResolver is the usual
// one). It must be safe for concurrent use.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// SRVResolver is a Resolver that also looks SRV records up, as *net.Resolver does (called
// with service and proto "" and the whole name). Servers given as srv:// need one.
type SRVResolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// MinLookupGap is the shortest time between two lookups of a stream's names that a failed
// connection asks for: a name whose servers keep failing is looked up again at most this
// often, not on every failure.
const MinLookupGap = time.Second

// Expand returns eps with each endpoint whose host is a DNS name — not an IP address, not a
// unix socket — given slots places in a row, one per address the name may have (a name
// with more addresses uses slots of them). Every place is a copy of the endpoint, with
// First the index of the name's first place and Slots their number; the others have
// Slots 1. With slots under 2, eps is returned as it is.
func Expand(eps []Endpoint, slots int) []Endpoint {
	if slots < 2 {
		return eps
	}
	out := make([]Endpoint, 0, len(eps))
	for _, ep := range eps {
		if ep.srv {
			ep.First, ep.Slots = len(out), slots
			for range slots {
				out = append(out, ep)
			}
			continue
		}
		host, port, err := net.SplitHostPort(ep.Address)
		if ep.Network != "tcp" || err != nil || isIP(host) {
			ep.First, ep.Slots = len(out), 1
			out = append(out, ep)
			continue
		}
		ep.First, ep.Slots, ep.host, ep.port = len(out), slots, host, port
		for range slots {
			out = append(out, ep)
		}
	}
	return out
}

func isIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// names is what Health knows of its names' lookups. Guarded by Health.mu.
type names struct {
	eps     []Endpoint
	r       Resolver
	period  time.Duration // between lookups
	timeout time.Duration // of one lookup
	next    time.Time     // when the next lookup is due
	last    time.Time     // when the last one began
	asked   bool          // a failed connection asked for a lookup
	running bool
	ended   bool // the first lookup has ended: Health.looked is closed
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Track has h follow the addresses of the names in eps (made by Expand, for the servers h
// was made for), looked up through r: a name's first slot is the name itself until a
// lookup gives it addresses (Dial then looks it up through r at each dial), its other slots
// are left out until then; a name with one address has it in one slot, as a name with
// several has each in one. Refresh looks the names up every period (and sooner after a
// failure, at most every MinLookupGap), each lookup bounded by timeout; Close stops the
// lookups. Without a name in eps it looks nothing up, and Looked is closed at once. Call it
// once, before h is shared.
func (h *Health) Track(eps []Endpoint, r Resolver, period, timeout time.Duration) {
	h.place(eps)
	hasName := false
	for i, ep := range eps {
		if ep.Slots > 1 && (i != ep.First || ep.srv) { // an SRV name has no server before its lookup
			h.servers[i].inactive = true
		}
		hasName = hasName || ep.Slots > 1
	}
	if !hasName {
		close(h.looked)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.names = names{eps: eps, r: r, period: period, timeout: timeout, ctx: ctx, cancel: cancel}
}

// Looked returns a channel closed once the first lookup of the names has ended, whatever it
// found (its timeout bounds it, unless the resolver ignores its context), or at once when
// Track has no name to look up: until then a name is one server, and a count of the servers
// (Spread) counts it once.
func (h *Health) Looked() <-chan struct{} { return h.looked }

// Refresh starts a lookup of the names in the background if one is due at now: the period
// has passed since the last, or a failed connection to one of the names' addresses asked
// for one at least MinLookupGap after the last. It never waits.
func (h *Health) Refresh(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	nm := &h.names
	if nm.r == nil || nm.closed || nm.running {
		return
	}
	due := !now.Before(nm.next)
	if !due && !now.Before(nm.last.Add(MinLookupGap)) {
		due = nm.asked || h.emptyName()
	}
	if !due {
		return
	}
	nm.running, nm.last, nm.next, nm.asked = true, now, now.Add(nm.period), false
	nm.wg.Add(1)
	go h.lookup()
}

// lookup looks every name up, all at once under one deadline (the timeout), and applies
// what it found.
func (h *Health) lookup() {
	nm := &h.names
	defer nm.wg.Done()
	ctx, cancel := context.WithTimeout(nm.ctx, nm.timeout)
	defer cancel()
	var todo []int // the endpoints to look up: each name's first
	seen := map[int]bool{}
	for i, ep := range nm.eps {
		if ep.Slots >= 2 && !seen[ep.First] {
			seen[ep.First] = true
			todo = append(todo, i)
		}
	}
	res := make([][]target, len(todo)) // none if the lookup failed: kept as they are, no news
	var wg sync.WaitGroup
	for k, i := range todo {
		ep := nm.eps[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ep.srv {
				if sr, ok := nm.r.(SRVResolver); ok {
					if _, recs, err := sr.LookupSRV(ctx, "", "", ep.Address); err == nil && len(recs) > 0 {
						res[k] = srvTargets(recs, ep.Weight, ep.Standby)
					}
				}
			} else if addrs, err := addresses(ctx, nm.r, ep.host, ep.port); err == nil {
				for _, a := range addrs {
					res[k] = append(res[k], target{addr: a, weight: ep.Weight, standby: ep.Standby})
				}
			}
		}()
	}
	wg.Wait()
	found := map[int][]target{} // a name's first slot: its addresses
	for k, i := range todo {
		found[nm.eps[i].First] = res[k]
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for first, ts := range found {
		if len(ts) > 0 {
			h.assign(first, nm.eps[first].Slots, ts)
		}
	}
	nm.running = false
	if !nm.ended {
		nm.ended = true
		close(h.looked)
	}
}

// target is one server of a name: the address to dial (an IP address and port; an SRV
// target's host name and port), its weight and whether it is a standby.
type target struct {
	addr    string
	weight  int
	standby bool
}

// srvTargets returns the servers of an SRV name's records (RFC 2782): each target at its
// port, its addresses looked up at each dial (Dial); the records of the lowest priority are
// the regular servers, the others standbys (and so are all of them if the srv:// server
// is); a target's weight is its record's times the srv:// server's own (a record's weight
// 0, which RFC 2782 gives the least share, counts as 1), so the records' ratios hold; a
// repeated target counts once.
func srvTargets(recs []*net.SRV, weight int, standby bool) []target {
	best := recs[0].Priority
	for _, r := range recs {
		best = min(best, r.Priority)
	}
	var ts []target
	seen := map[string]bool{}
	for _, r := range recs {
		addr := net.JoinHostPort(strings.TrimSuffix(r.Target, "."), strconv.Itoa(int(r.Port)))
		if seen[addr] {
			continue
		}
		seen[addr] = true
		ts = append(ts, target{addr: addr, weight: max(int(r.Weight), 1) * max(weight, 1), standby: standby || r.Priority != best})
	}
	slices.SortFunc(ts, func(a, b target) int { return strings.Compare(a.addr, b.addr) })
	return ts
}

// addresses returns the addresses to dial for host at port: host itself if it is an IP
// address, else the addresses r (net.DefaultResolver if nil) gives for it — those of IPv4
// if it has any, else those of IPv6 (a receiver listening on 0.0.0.0, fluentd's default, is
// not on the IPv6 ones of a dual-stack name) —, without repeats, sorted. It is the one
// place a name becomes addresses: a name's lookups (Track) and every dial (Dial) go through
// it, so the transport is never given a name. A failed lookup returns r's error; one with
// no address, an error that names the host. Safe for concurrent use if r is.
func addresses(ctx context.Context, r Resolver, host, port string) ([]string, error) {
	if isIP(host) {
		return []string{net.JoinHostPort(host, port)}, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	if addrs := targets(ips, port); len(addrs) > 0 {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
}

// targets returns the addresses to dial for a name's IPs, as addresses says.
func targets(addrs []net.IPAddr, port string) []string {
	var v4, v6 []string
	for _, a := range addrs {
		if a.IP.To4() != nil {
			v4 = append(v4, net.JoinHostPort(a.IP.String(), port))
		} else if a.IP != nil {
			v6 = append(v6, net.JoinHostPort(a.String(), port))
		}
	}
	ts := v4
	if len(ts) == 0 {
		ts = v6
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// assign gives a name's slots [first, first+n) the servers ts: a slot keeps its address if
// ts still has it, with the weight and standby flag ts now gives it; a slot whose address
// is gone is left out; and the new addresses take the free slots, as up servers with no
// connection yet (addresses past the slots are left out). It reports whether an address changed. The caller holds h.mu.
func (h *Health) assign(first, n int, ts []target) bool {
	slots := h.servers[first : first+n]
	keep := map[string]target{}
	for _, t := range ts {
		keep[t.addr] = t
	}
	changed := false
	for i := range slots {
		s := &slots[i]
		t, ok := keep[s.target]
		if !s.inactive && !ok {
			s.inactive, s.gen, changed = true, s.gen+1, true
		}
		if !s.inactive {
			s.weight, s.standby = t.weight, t.standby
			delete(keep, s.target)
		}
	}
	// The new addresses take the free slots in an order of this process's own: the
	// connections prefer the first slots when loads tie, and cores that all sorted them
	// alike would all start on the same addresses of a large name.
	ts = slices.Clone(ts)
	rand.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	for _, t := range ts {
		if _, ok := keep[t.addr]; !ok {
			continue
		}
		free := -1
		for i := range slots {
			if slots[i].inactive {
				free = i
				break
			}
		}
		if free < 0 {
			break
		}
		s := &slots[free]
		s.inactive, s.target, s.gen, changed = false, t.addr, s.gen+1, true
		s.weight, s.standby = t.weight, t.standby
		s.down.Store(false)
		s.retryAt, s.downAt = time.Time{}, time.Time{}
		s.bo.Reset()
		delete(keep, t.addr)
	}
	return changed
}

// emptyName reports whether a name has no server now (an SRV name before its first
// lookup that answered). The caller holds h.mu.
func (h *Health) emptyName() bool {
	for _, ep := range h.names.eps {
		if ep.Slots < 2 || !ep.srv {
			continue
		}
		empty := true
		for i := ep.First; i < ep.First+ep.Slots; i++ {
			empty = empty && h.servers[i].inactive
		}
		if empty {
			return true
		}
	}
	return false
}

// askLookup has the next Refresh look the names up (at most every MinLookupGap) after a
// failure of server i, if it is one of a name's addresses. The caller holds h.mu.
func (h *Health) askLookup(i int) {
	if h.names.r != nil && i < len(h.names.eps) && h.names.eps[i].Slots > 1 {
		h.names.asked = true
	}
}

// Close stops the lookups and waits for the one under way, if any. Refresh starts none
// after it. Safe to call more than once.
func (h *Health) Close() {
	h.mu.Lock()
	h.names.closed = true
	cancel := h.names.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.names.wg.Wait()
}
