package forward

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/dial"
)

// pool is what a stream's connections share: their settings, the servers' health, which
// follows the addresses of the servers' names (dial.Health), and how many of the
// connections send.
//
// Invariants: sending is at least 1 and at most made, and changes at most once: a stream
// that counts its servers (n 0) while a name's first lookup is under way sends on 1 until
// that lookup ends, then on as many as it found (dial.Health.Spread). No connection sends
// before the count it belongs to is known: with waits, every connection waits for the first
// lookup (Start), so that the connections are counted and placed over the names' addresses
// as they will stay; one connection alone never waits, and looks a name up as it dials.
// New never waits on a lookup.
type pool struct {
	s      *Settings
	health *dial.Health
	made   int  // the forwarders New made: the count, or its bound while it waits for a lookup
	waits  bool // the connections wait for the first lookup before they send
	counts bool // the first lookup gives the count (sending)
	once   sync.Once
	// sending is how many of the connections send: those whose index is under it.
	sending atomic.Int32
}

// newPool returns the pool of a stream's n connections (0: one per server, see New) on
// s's servers, and starts the first lookup of their names in the background.
func newPool(s *Settings, n int) *pool {
	h := dial.NewHealth(len(s.Endpoints), s.NewBackoff)
	h.Track(s.Endpoints, s.Resolver, s.ResolveInterval, min(s.DialTimeout, lookupTimeout))
	h.Refresh(s.Clock.Now())
	p := &pool{s: s, health: h}
	looked := false
	select {
	case <-h.Looked(): // no name, or the lookup has ended already
		looked = true
	default:
	}
	switch {
	case n == 0 && looked:
		n = h.Spread(s.Endpoints, max(s.SpreadMost, 1))
	case n == 0:
		p.waits, p.counts = true, true
		p.made = max(s.SpreadMost, 1)
		p.sending.Store(1)
		return p
	default:
		p.waits = n > 1 && !looked
	}
	p.made = n
	p.sending.Store(int32(n))
	return p
}

// await waits, if the connections wait, for the first lookup of the names, and returns how
// many of the connections send; false if ctx ended first.
func (p *pool) await(ctx context.Context) (int, bool) {
	if p.waits {
		select {
		case <-p.health.Looked():
		case <-ctx.Done():
			return 0, false
		}
		if p.counts {
			p.once.Do(func() {
				p.sending.Store(int32(p.health.Spread(p.s.Endpoints, max(p.s.SpreadMost, 1))))
			})
		}
	}
	return int(p.sending.Load()), true
}
