package shed

import (
	"math"
	"math/bits"
	"time"
)

// minStep is the shortest step counted on its own; quietAfter how long a key must offer
// nothing before its keep ratio is reset to 1, and how long a flood must stay within its
// share before it is no longer one (markFlood).
const (
	minStep    = 2 * time.Millisecond
	quietAfter = 100 * time.Millisecond
)

// roomySteps is how many steps of the flood as it is the room must hold for the allowance
// to be unlimited: a flood that grows faster than that within a step outruns it.
const roomySteps = 4

// peakDecay is how fast the flood's peak per step is forgotten: by half in about 34 steps.
const peakDecay = 0.98

// capacityTau smooths the measured delivery rate. Delivery comes in bursts: a batch holds
// hundreds of entries, and without acks a write completes when the kernel takes it, so
// against a slow receiver the socket buffers fill at once and then take nothing until the
// receiver has freed half of them. Each delivery is measured over the span since the one
// before, and the spans are averaged with this time constant. A wrong estimate costs
// little: the budget's room term corrects it step by step, and the allowance stops what
// does not fit whatever the estimate.
const capacityTau = 500 * time.Millisecond

// capacityPeakTau is how fast Capacity's recent peak forgets a higher rate, per second of
// delivery measured (see delivery).
const capacityPeakTau = time.Second

// Observation is what Step reads from the stream: its contract with the shedder.
//
//   - Room and Written are read together, while writers go on, so that they agree: an
//     entry counted in Written is out of Room, and one not counted yet is still in it.
//     Step takes the entries Keep admitted that Written does not count (pending) off the
//     room: an entry counted in Written with its room still in Room has its room promised
//     twice (a flood takes the margin); one out of Room and not counted is taken off twice,
//     which only sheds early.
//   - Written counts every entry the stream has taken in, once, whether it then found room
//     or not, and none that Keep shed. It may read a few high at one step and lower at the
//     next (Step takes the difference signed); otherwise it only grows.
//   - Delivered only grows.
//   - The stream reads them before it calls Step, and calls Freed for an entry that left
//     the buffer before the entry's room can show in Room: so a step that reads the room
//     counts every freed entry once (see setAllowance).
//   - Now does not go back between steps, and is read after Room, Written and Delivered: a
//     step's length is the span its counts cover. Timed before a slow read of them (the
//     stream waits for its writers' locks), a step would set the offers of the whole read
//     against a span too short, and take a burst that fits for a flood.
type Observation struct {
	Now       time.Time
	Fill      float64 // share of the buffer budget in use
	Room      float64 // entries the buffer can still take before Config.Full; negative past it; math.MaxFloat64 if unknown
	Margin    float64 // entries the buffer holds between Config.Full and its end
	Written   uint64  // entries the stream has taken in so far (counted when its writers take them)
	Delivered uint64  // entries the sender has delivered so far
	Connected bool    // the sender is delivering: false while its sends fail (an outage)
}

// stepView is what a step has read and measured before it counts the keys.
type stepView struct {
	o       Observation
	dt      float64 // seconds since the step before
	got     uint64  // entries delivered since the step before
	written int64   // entries taken in since the step before, or since a wake; signed
	backlog bool    // the fill is above Config.Low
	before  int64   // the limit as the step began, after the stream's reads (o)
}

// Step moves the controller to o.Now. Call it from one goroutine at a time, every few
// milliseconds while Counting, with o as Observation says; a step shorter than minStep is
// left to the next. In order: observe reads o (the clock, Capacity, Written); while keys are
// counted, gather counts what each key offered and had shed since the last step;
// setAllowance sets the allowance from the room; setRatios sets each key's keep ratio
// from the budget.
func (s *Shedder) Step(o Observation) {
	v, counting := s.observe(o)
	if !counting {
		return
	}
	offered, kept := s.gather()
	s.setAllowance(v, offered, kept)
	s.setRatios(v, offered)
}

// observe moves the step's clock, Capacity and Written to o, and reports whether the rest
// of the step runs: not for the first step (its counts start here) or one too short, and
// not while Keep does not count keys (then the allowance is unlimited, and the step starts
// counting once the fill is past CountsFrom).
func (s *Shedder) observe(o Observation) (v stepView, counting bool) {
	dt, got, ok := s.advance(o.Now, o.Delivered)
	if !ok {
		return v, false
	}
	v = stepView{o: o, dt: dt, got: got, backlog: o.Fill > s.cfg.Low}
	s.measureCapacity(v)
	v.written = s.takenIn(o.Written)
	if !s.counting.Load() {
		s.allowance.unlimit()
		s.pending, s.offeredPeak = 0, 0
		if o.Fill > s.CountsFrom() {
			s.calmSince = time.Time{}
			s.counting.Store(true)
		}
		return v, false
	}
	// The limit as the stream's reads left it: what Freed adds from here on is in neither
	// the room nor this, and setAllowance sets the new limit as a change to the live one so
	// that it keeps them.
	v.before = s.allowance.limit.Load()
	return v, true
}

// advance moves the step's clock to now and returns the step's length and what the
// sender delivered in it. It reports false for a step too short to count on (the next
// one takes it in; the clock stays), and for the first step or one with no time passed
// (Written and the keys are counted from it, or a wake, at the next).
func (s *Shedder) advance(now time.Time, delivered uint64) (dt float64, got uint64, ok bool) {
	dt = now.Sub(s.stepAt).Seconds()
	first := s.stepAt.IsZero()
	if !first && dt < minStep.Seconds() {
		return dt, 0, false
	}
	s.stepAt = now
	got = delivered - s.delivered
	s.delivered = delivered
	return dt, got, !first && dt > 0
}

// measureCapacity moves Capacity: while the sender had a backlog since it last delivered,
// connected, what it delivered over that span is what it can. Per delivery, not per step:
// a step sees a whole batch or none.
func (s *Shedder) measureCapacity(v stepView) {
	now := v.o.Now
	if s.progressAt.IsZero() {
		s.progressAt = now
	}
	if v.got > 0 && s.hadBacklog && v.o.Connected {
		since := now.Sub(s.progressAt).Seconds()
		rate := float64(v.got) / since
		c := s.Capacity()
		if c == 0 {
			c = rate
		} else {
			c += (1 - math.Exp(-since/capacityTau.Seconds())) * (rate - c)
		}
		s.capacity.Store(math.Float64bits(c))
		// A pause or an outage ends with one delivery over its whole span, which brings
		// Capacity down at once; the peak forgets no more than capacityTau of a span.
		s.capacityPeak = max(c, s.capacityPeak*math.Exp(-min(since, capacityTau.Seconds())/capacityPeakTau.Seconds()))
	}
	if v.got > 0 || !v.backlog {
		s.progressAt = now
	}
	s.hadBacklog = v.backlog
}

// takenIn returns the entries the stream took in since the last step, from its Written.
// Written may read a few high (a stream counts an entry Check shed before its drop) and
// then lower: the difference is signed, so that it neither wraps (and wipes out pending)
// nor, held at 0 for the step, counts the step's every entry as pending. After a wake it
// is what was taken in since the wake, as the keys are counted since: the entries taken
// in before it, which Keep did not count, would otherwise cancel out entries it counted
// that are still pending. (An observation older than the wake has nothing since it.)
func (s *Shedder) takenIn(written uint64) int64 {
	n := int64(written - s.written)
	if s.woke.Swap(false) {
		n = max(0, int64(written-s.wokeWritten.Load()))
	}
	s.written = written
	return n
}

// gather collects the keys offered since the last step into s.keys and returns how many
// entries they offered and how many Keep kept: what they offered less what was shed, which
// may be negative (see below).
//
// Keep's callers go on while gather reads, and a step may be held off the CPU between any
// two reads. So a slot's shed count is read before its offers (countShed, then
// countOffers): every entry counts as offered before it is shed, so every shed entry read
// has its offer read too. An entry offered after the shed count is read counts as kept in
// this step and, if it is shed, as shed in the next one, which then may count fewer kept
// than none. Read the other way round, the shed entries offered after the offers' read
// would count against this step's offers: kept would come up short by them, the
// allowance would promise room to entries on their way into the buffer, and the flood
// would take the margin.
//
// It reads only the slots Keep touched since the last step and those the step watches
// (Shedder.touched, Shedder.watched): the others hold no count and no state to move.
func (s *Shedder) gather() (offered uint64, kept int64) {
	s.keys = s.keys[:0]
	var shed uint64
	for w := range s.touched {
		for read := s.touched[w].Swap(0) | s.watched[w]; read != 0; read &= read - 1 {
			i := w*64 + bits.TrailingZeros64(read)
			shed += s.countShed(i)
			offered += s.countOffers(i)
			if bit := uint64(1) << (i % 64); s.slots[i].atRest() {
				s.watched[w] &^= bit
			} else {
				s.watched[w] |= bit
			}
		}
	}
	return offered, int64(offered) - int64(shed)
}

// countShed returns the entries of slot i shed since the last step.
func (s *Shedder) countShed(i int) uint64 {
	sl := &s.slots[i]
	n := sl.shed.Load()
	d := n - s.shedAtStep[i]
	s.shedAtStep[i] = n
	return d
}

// countSpent adds what slot i's entries took of the allowance since the last step to
// spentRead; countOffers calls it right after its read of the slot's offers. Keep adds an
// entry's payment to its slot after it counts the entry, so a payment read is for entries
// counted (as kept: pending holds them) or for entries of a lease that countOffers then
// ends, which pay again if they come: either way setAllowance does not take it off the new
// allowance again. A payment made after this read is for entries the step did not count
// (but for a caller between its count and its payment): setAllowance takes it off.
func (s *Shedder) countSpent(i int) {
	n := s.slots[i].spent.Load()
	s.spentRead += n - s.spentAtStep[i]
	s.spentAtStep[i] = n
}

// countOffers returns the entries offered to slot i since the last step, adds its key to
// s.keys if there were any, and moves its recent count. A slot offered nothing for
// quietAfter comes back whole: its ratio one, no flood. Not after one quiet step: its
// callers may only have been off the CPU.
func (s *Shedder) countOffers(i int) uint64 {
	sl := &s.slots[i]
	t := sl.offered.Load()
	s.countSpent(i)
	c := t - sl.offeredAtStep.Load()
	// The lease ends at the entries counted here: the step measures the room anew, and
	// those it counts as kept, which pending then holds, pay no more (take).
	if sl.leased.Load() != t {
		sl.leased.Store(t)
	}
	// The key's recent count: this step's, or half the step before's, if more. Half, so
	// that a ticker's entries falling two in one step and none in the next count as one
	// a step, not as none.
	if r := sl.recent.Load(); r != 0 || c != 0 {
		sl.recent.Store(uint32(min(max(c, uint64(r/2)), math.MaxUint32)))
	}
	at := s.stepAt.UnixNano()
	if c == 0 {
		if (sl.ratio.Load() != one || sl.flood.Load()) && at-s.offeredAt[i] >= int64(quietAfter) {
			s.setRatio(i, one)
			s.markFlood(i, one)
		}
		return 0
	}
	sl.offeredAtStep.Store(t)
	span := quietAfter
	if s.offeredAt[i] != 0 {
		span = min(time.Duration(at-s.offeredAt[i]), quietAfter)
	}
	s.offeredAt[i] = at
	s.keys = append(s.keys, key{slot: i, level: sl.level.Load(), count: c, span: span})
	return c
}

// setAllowance counts what is pending and sets the allowance: the room the buffer has now
// with its margin, less pending, which Freed then adds to as the sender frees room. It is
// what fits, however late the next step, and it needs no Capacity. Keep's callers go on
// while the step runs, and the step may be held off the CPU anywhere in it; an entry they
// let through is counted once either way: read by gather, as pending; or not, as spent
// since (see countSpent). It is unlimited while
// the sender is disconnected, or while the room up to Full holds roomySteps steps of the
// flood at its recent peak (or of Capacity), so that Keep writes nothing shared while there
// is no need.
func (s *Shedder) setAllowance(v stepView, offered uint64, kept int64) {
	o := v.o
	// What Keep let through that the stream has not taken in yet will take room that the
	// step's Room does not show: many callers between Check and Write.
	s.pending = max(0, s.pending+float64(kept)-float64(v.written))
	// The flood's recent peak per step: a step's count alone can miss it while its callers
	// are off the CPU.
	s.offeredPeak = max(float64(offered), s.offeredPeak*peakDecay)
	room := o.Room + o.Margin - s.pending
	if !o.Connected || room-o.Margin >= roomySteps*max(s.offeredPeak, s.Capacity()*v.dt) {
		s.allowance.unlimit()
		return
	}
	s.allowance.set(room, int64(o.Margin), s.spentRead, v.before)
}

// setRatios sets each offered key's keep ratio, and the flood marks. Everything is
// admitted while the buffer is calm (and after Config.Calm of it keys are no longer
// counted), while the sender is disconnected (nothing drains, so a budget from the
// delivery rate would shed everything the buffer could still hold: what does not fit is
// counted where it is dropped), before a first Capacity (the allowance alone keeps what
// fits), and while the step's offers are within the budget. Past the budget, it is shared
// out fairly, and only the floods are thinned (thin).
func (s *Shedder) setRatios(v stepView, offered uint64) {
	if !v.backlog {
		s.admitAll()
		s.calm(v.o.Now)
		return
	}
	s.calmSince = time.Time{}
	if !v.o.Connected {
		s.admitAll()
		return
	}
	c := s.Capacity()
	if c == 0 {
		// What the sender took in the step still tells the flood from the rest.
		s.admitAll()
		s.markFloods(offered, s.delivery(v.got, v.dt, v.o.Margin), v.dt)
		return
	}
	b := budget(c, v.dt, v.got, v.o.Room)
	// The keys over their fair share of delivery are the floods, whether this step thins
	// them or not: they may fill the room, never the margin (see fits).
	s.markFloods(offered, s.delivery(v.got, v.dt, v.o.Margin), v.dt)
	if float64(offered) <= b {
		s.admitAll()
		return
	}
	s.share(b, v.dt, s.thin)
	var admitted float64
	for _, k := range s.keys {
		admitted += float64(k.count) * float64(s.slots[k.slot].ratio.Load()) / one
	}
	s.keepRatio.Store(math.Float64bits(admitted / float64(offered)))
}

// calm counts a step at or under the low mark: once the buffer has been calm for
// Config.Calm, Keep stops counting keys and the allowance is unlimited.
func (s *Shedder) calm(now time.Time) {
	if s.calmSince.IsZero() {
		s.calmSince = now
	}
	if now.Sub(s.calmSince) >= s.cfg.Calm {
		s.counting.Store(false)
		s.allowance.unlimit()
	}
}
