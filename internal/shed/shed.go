// Package shed decides which entries a stream keeps when its callers offer more than its
// sender can deliver and its buffer can hold: the adaptive degrade policy. It imports no
// other fluentcore package (see ARCHITECTURE.md).
//
// The rule: an entry is shed only when, had it been admitted, it or a later entry would
// have been dropped for lack of room, and then the shedding is fair. The buffer is a shock
// absorber used to the end: each step's budget is what the sender delivers in a step
// (Capacity × step) plus the room left up to Full (negative past it), and while the offered
// load is within it everything is admitted, however full the buffer is; the excess is
// shed, fairly. An allowance — the room, counted down by what is admitted and up by what
// the sender frees — then stops exactly what would not fit, whatever the step's estimate
// of the flood. Capacity, the delivery rate measured while the buffer held a backlog,
// counts only once a step's flood is more than the room left: it decides how much to
// thin, and until a first Capacity exists nothing is thinned by rate.
//
// The budget is shared out fairly (max-min, "water filling") over keys, a key being a
// message at a level, counted per step in a fixed table: a rare key (seen once in the
// step, or at no more than rareRate a second) is kept whole whatever the budget, the keys
// offering less than an equal share are kept whole, and the rest are thinned to the same
// number each, so the most frequent keys lose the most. Levels are served in order,
// highest first: Warn is thinned only once Info and Debug have nothing left, and Info only
// after Debug. The share of the buffer above Full is a margin that the rare keys' entries
// find room in while the budget is being used to the end. A key over its fair share of
// what the sender delivers (the same sharing, over the delivery alone) is a flood, and stays
// one until it has been within its share for quietAfter, so that a flood whose callers were
// off the CPU for a step does not come back as a key kept whole. A key that is not a flood
// is not thinned by the budget, which a step with no delivery and a full buffer leaves at
// nothing: only the allowance, the room actually left, stops its entries.
// Honeycomb's dynsampler-go gives each key a rate from its share of past traffic, for a
// fixed goal rate; here the goal is the measured capacity plus the room left, moved every
// step, and a key's rate follows it.
//
// Which entries of a thinned key are kept is systematic, not random: with keep ratio r
// the n-th entry is kept when ⌊n·r⌋ moves, so exactly the ratio is kept, spread evenly,
// with no random number on the caller's path. Keep is one atomic load while the buffer is
// calm (under half the low mark, or under the low mark for Calm), and a hash of the
// message, an atomic add and three loads otherwise, and near a full buffer a count down of
// the key's lease of the allowance.
//
// The keep ratios are set once a step from the step before's counts, and a flood that
// grows within a step, or a step that comes late, can outrun them. So the room is also an
// allowance, counted down by what Keep admits and up by what the sender frees: once it is
// down to the margin, the keys being thinned get nothing more, the others go on into it,
// and past it only a key's first few entries since the step pass: the margin goes to the
// keys kept whole and to rare keys, not to the flood
// (TestReserveKeepsRareKeysWhenStepsLag, TestWarnKeptWholeUnderAnInfoFlood). It needs no
// Capacity: at start-up it sheds just what the buffer could not have held. In the margin the
// allowance goes entry by entry, so that the keys kept whole, which offer a few entries a
// step, are not each leased a chunk of it.
//
// Keep's callers go on while a step runs, and a step may be held off the CPU anywhere in it.
// So a step counts each key's drops before its offers (no drop without its offer), and sets
// the new allowance as a change to the live one (what Keep let through meanwhile stays
// counted): otherwise the room of entries on their way into the buffer is promised again,
// and the flood takes the margin.
package shed

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Slots is the size of the key table. Keys that hash alike share a slot, and are then
// thinned as one key.
const Slots = 4096

// one is a keep ratio of 1 in the table's fixed point.
const one = 1 << 16

// firstFew is how many entries of a key kept whole since the last step pass once the
// allowance is spent, or as many as it offered in a step lately (slot.recent), if more: a
// few, not one, so that a rare key whose steps come late (a flood keeping the clock and the
// callers that step off the CPU) still passes whole; its recent count, so that a key kept
// whole, within its share of what the sender delivers, passes whole through a step whose
// allowance was read short. The room is read while writers go on, and a batch on its way
// between the free list and a shard, or back, counts in it a step late: an allowance short
// by a batch for a step shed a steady Warn past its first few. The keys kept whole share no
// more than what the sender delivers in a step between them (share), so what they pass
// this way the sender drains while it delivers; the flood is kept out of it.
const firstFew = 4

// A key is rare in a step if it offered one entry, or no more than rareRate a second over
// the step or the time since it was last offered (at most quietAfter), whichever is longer.
const rareRate = 200

// minStep is the shortest step counted on its own; quietAfter how long a key must offer
// nothing before its keep ratio is reset to 1, and how long a flood must stay within its
// share before it is no longer one (markFlood).
const (
	minStep    = 2 * time.Millisecond
	quietAfter = 100 * time.Millisecond
)

// Config sets the controller's marks, as shares of the buffer budget (0..1).
type Config struct {
	// Low is the fill under which the stream is calm: keys are counted from half of it
	// on, and no longer once the fill has stayed at or under it for Calm. Capacity is
	// measured only while the fill is above it (the sender then has a backlog).
	Low float64
	// Full is the fill up to which the budget admits the flood; the rest is the margin
	// for rare keys. Above Low, at most 1.
	Full float64
	// Calm is how long the buffer must stay at or below Low, connected, before keys stop
	// being counted (Keep is one atomic load again).
	Calm time.Duration
}

// Shedder is one stream's adaptive admission. Keep and Weight are safe for concurrent use
// and allocation-free; Step must be called from one goroutine at a time.
type Shedder struct {
	cfg      Config
	counting atomic.Bool
	slots    [Slots]slot

	// Set by Wake for the next Step: the stream's Written when Keep began counting.
	woke        atomic.Bool
	wokeWritten atomic.Uint64

	// Read concurrently, written by Step.
	capacity  atomic.Uint64 // float64 bits: entries/s
	keepRatio atomic.Uint64 // float64 bits: kept/offered over the last step
	left      atomic.Int64  // entries the buffer may still take (see Keep, Freed)
	reserve   atomic.Int64  // of them, the entries kept for the keys kept whole (the margin)

	// Step's own.
	last          time.Time
	lastDelivered uint64
	lastProgress  time.Time // the last step in which the sender delivered, or had no backlog
	hadBacklog    bool      // the fill was over Low at the last step
	calmSince     time.Time
	seen          [Slots]int64  // unix nanos of the last step each slot was offered anything
	floodAt       [Slots]int64  // unix nanos of the last step each slot was over its share (markFlood)
	seenDropped   [Slots]uint64 // each slot's dropped at the last step
	lastWritten   uint64        // Observation.Written at the last step
	pending       float64       // entries Keep kept that the stream has not taken in yet
	capPeak       float64       // Capacity's recent peak, forgetting slowly (see delivery)
	peak          float64       // the most offered in a step, decaying by peakDecay a step
	keys          []key         // scratch: the keys offered in the last step

	betweenReads func(slot int) // tests only: called in gather between a slot's two reads
}

type slot struct {
	total   atomic.Uint64 // entries offered, ever: the systematic sampler's phase
	base    atomic.Uint64 // total at the last step
	ratio   atomic.Uint32 // keep ratio, one = keep all
	level   atomic.Int32  // the level of the key last counted here
	shed    atomic.Uint64 // entries shed since one of the slot's was last weighed (Weight)
	dropped atomic.Uint64 // entries shed, ever
	lease   atomic.Int64  // allowance the key has taken and not used yet (see take)
	flood   atomic.Bool   // a flood (markFlood): kept out of the margin
	recent  atomic.Uint64 // entries offered in a step lately (see gather, firstFew)
}

type key struct {
	slot  int
	level int32
	count uint64
	span  time.Duration // since the slot was last offered anything, at most quietAfter
}

// New returns a Shedder that admits everything until Step sees a backlog.
func New(cfg Config) *Shedder {
	s := &Shedder{cfg: cfg, keys: make([]key, 0, Slots)}
	for i := range s.slots {
		s.slots[i].ratio.Store(one)
	}
	s.keepRatio.Store(math.Float64bits(1))
	s.left.Store(unbounded)
	return s
}

// Keep reports whether an entry of msg at level is kept. Higher levels are kept first.
// Beyond its key's keep ratio, an entry passes while the allowance (the room the buffer had
// at the last step, and what the sender has freed since) lasts: for a key the step thins or
// a flood (markFlood), until only the margin past Full is left; for the others, to the end;
// past that only a key's first few entries since the step, or its recent count (firstFew),
// pass. So a flood that grows within a step, or a step that comes late, leaves the margin to
// the keys the fair share keeps whole, and to rare keys.
func (s *Shedder) Keep(level int8, msg string) bool { return s.KeepTag(level, 0, msg) }

// KeepTag is Keep for a message of a tag: a key is a message at a level of a tag, so that a
// flood of one tag's message does not thin another tag's entries of the same message. Tag 0
// is Keep's key.
func (s *Shedder) KeepTag(level int8, tag uint16, msg string) bool {
	if !s.counting.Load() {
		return true
	}
	sl := &s.slots[slotOf(level, tag, msg)]
	n := sl.total.Add(1)
	if sl.level.Load() != int32(level) {
		sl.level.Store(int32(level))
	}
	r := uint64(sl.ratio.Load())
	if r < one && (n*r)>>16 == ((n-1)*r)>>16 {
		sl.drop()
		return false
	}
	// The room left decides: a key the step thins, or a flood, stops short of the reserve;
	// the others go on into it, and past it only their first few since the step pass.
	left := s.left.Load()
	if left >= unbounded/2 {
		return true
	}
	var limit int64
	if r < one || sl.flood.Load() {
		limit = s.reserve.Load()
	}
	if s.take(sl, limit) || (limit == 0 && n-sl.base.Load() <= max(firstFew, sl.recent.Load())) {
		return true
	}
	sl.drop()
	return false
}

// Whole reports whether msg at level is a key kept whole: not thinned by the last step,
// and not a flood (markFlood), which is kept out of the margin.
// Every key is while keys are not counted. Safe for concurrent use; a hash and two loads.
func (s *Shedder) Whole(level int8, msg string) bool { return s.WholeTag(level, 0, msg) }

// WholeTag is Whole for a message of a tag (see KeepTag).
func (s *Shedder) WholeTag(level int8, tag uint16, msg string) bool {
	if !s.counting.Load() {
		return true
	}
	sl := &s.slots[slotOf(level, tag, msg)]
	return sl.ratio.Load() == one && !sl.flood.Load()
}

// leaseChunk is how much of the allowance a key takes at a time into its slot's lease: the
// key's callers then count down their own slot's line, which they write anyway, rather than
// all of them one shared line per entry.
const leaseChunk = 32

// take takes one entry's room for a key, down to limit: from the slot's lease, else a chunk
// of the shared allowance while that leaves the margin (the reserve) whole, else a single
// entry of it. In the margin a chunk would hold room that only its key may use until the next
// step, and the keys that go on into the margin are the ones kept whole, rare ones among
// them, which offer an entry or two a step: a chunk each would spend the margin many times
// faster than they fill it (TestTheMarginIsTakenEntryByEntry). A caller that races past
// the limit gives back what it took.
func (s *Shedder) take(sl *slot, limit int64) bool {
	if sl.lease.Add(-1) >= 0 {
		return true
	}
	sl.lease.Add(1)
	if floor := s.reserve.Load(); s.left.Load() >= floor+leaseChunk {
		if s.left.Add(-leaseChunk) >= floor {
			sl.lease.Add(leaseChunk - 1)
			return true
		}
		s.left.Add(leaseChunk)
	}
	if s.left.Load() > limit {
		if s.left.Add(-1) >= limit {
			return true
		}
		s.left.Add(1)
	}
	return false
}

// drop counts an entry Keep shed: for its key's next weight, and for the step.
func (sl *slot) drop() {
	sl.shed.Add(1)
	sl.dropped.Add(1)
}

// Weight is how many entries of msg at level a kept entry stands for: itself, and the
// entries of its key shed since the key's last weighed entry, which it takes over. So the
// weights of what is kept add up to what was offered, whatever the keep ratio did between
// two kept entries (a step's new ratio, a spent allowance); only the entries shed
// after the last kept one are not counted yet. Keys that share a slot share that count.
// Call it once per kept entry.
func (s *Shedder) Weight(level int8, msg string) uint32 { return s.WeightTag(level, 0, msg) }

// WeightTag is Weight for a message of a tag (see KeepTag).
func (s *Shedder) WeightTag(level int8, tag uint16, msg string) uint32 {
	sl := &s.slots[slotOf(level, tag, msg)]
	if sl.shed.Load() == 0 { // kept whole: no write to the slot
		return 1
	}
	return uint32(min(1+sl.shed.Swap(0), math.MaxUint32))
}

// roomySteps is how many steps of the flood as it is the room must hold for Keep to keep no
// allowance: a flood that grows faster than that within a step outruns it.
const roomySteps = 4

// peakDecay is how fast the flood's peak per step is forgotten: by half in about 30 steps
// (150 ms at the sink's 5 ms).
const peakDecay = 0.98

// unbounded is an allowance that no flood spends, and that Freed can add to.
const unbounded = math.MaxInt64 / 2

// Freed adds n entries that have left the buffer to the step's allowance (see Keep). Safe
// for concurrent use.
func (s *Shedder) Freed(n int) {
	if s.left.Load() < unbounded/2 {
		s.left.Add(int64(n))
	}
}

// Unweigh gives back w entries of msg at level to its key: a weighed entry that was not
// kept after all (the stream had no room for it), which the next weighed entry then carries.
// Safe for concurrent use.
func (s *Shedder) Unweigh(level int8, msg string, w uint32) { s.UnweighTag(level, 0, msg, w) }

// UnweighTag is Unweigh for a message of a tag (see KeepTag).
func (s *Shedder) UnweighTag(level int8, tag uint16, msg string, w uint32) {
	s.slots[slotOf(level, tag, msg)].shed.Add(uint64(w))
}

// CountsFrom is the fill from which keys are counted: half the low mark, so that the
// counts are there when the fill reaches it (a flood crosses the rest within a step).
// Whoever wakes the shedder (Wake) on a fill uses it too.
func (s *Shedder) CountsFrom() float64 { return s.cfg.Low / 2 }

// Counting reports whether Keep is counting keys (the buffer has been above the low mark
// recently): the caller then calls Keep; otherwise it may skip it.
func (s *Shedder) Counting() bool { return s.counting.Load() }

// Capacity is the delivery rate measured while the buffer held a backlog, in entries per
// second, smoothed; 0 until measured.
func (s *Shedder) Capacity() float64 { return math.Float64frombits(s.capacity.Load()) }

// KeepRatio is the share of the entries offered in the last step that the budget let
// through (1 when nothing was thinned).
func (s *Shedder) KeepRatio() float64 { return math.Float64frombits(s.keepRatio.Load()) }

// capPeakTau is how fast Capacity's recent peak forgets a higher rate, per second of
// delivery measured (see delivery).
const capPeakTau = time.Second

// capacityTau smooths the measured delivery rate. Delivery comes in bursts: a batch holds
// hundreds of entries, and without acks a write completes when the kernel takes it, so
// against a slow receiver the socket buffers (megabytes on loopback) fill at once and then
// take nothing until the receiver has freed half of them, for a second or more. Each
// delivery is measured over the span since the one before, and the spans are averaged
// with this time constant. A wrong estimate costs little: the budget's room term corrects
// it step by step, and the allowance stops what does not fit whatever the estimate.
const capacityTau = 500 * time.Millisecond

// Observation is what Step reads from the stream. Room and Written must agree while the
// writers go on: an entry counted in Written is out of Room, and one not counted yet is
// still in it, since Step takes the entries Keep kept that Written does not count off the
// room. Counted in Written with its room still in Room, an entry's room is promised
// twice; out of Room and not counted, it is taken off twice, which only sheds early.
// Written may fall back by a few between two steps (Step takes the difference signed).
type Observation struct {
	Now       time.Time
	Fill      float64 // share of the buffer budget in use
	Room      float64 // entries the buffer can still take before Config.Full; negative past it; math.MaxFloat64 if unknown
	Margin    float64 // entries the buffer holds between Config.Full and its end
	Written   uint64  // entries the stream has taken in so far (counted when its writers take them)
	Delivered uint64  // entries the sender has delivered so far
	Connected bool    // the sender is delivering: false while its sends fail (an outage)
}

// Step moves the controller to o.Now.
func (s *Shedder) Step(o Observation) {
	now := o.Now
	dt := now.Sub(s.last).Seconds()
	first := s.last.IsZero()
	if !first && dt < minStep.Seconds() {
		return // too short to count on: the next step takes it in
	}
	s.last = now
	got := o.Delivered - s.lastDelivered
	s.lastDelivered = o.Delivered
	if first || dt <= 0 {
		return // Written and the keys are counted from the last step, or a wake, at the next
	}
	backlog := o.Fill > s.cfg.Low
	if s.lastProgress.IsZero() {
		s.lastProgress = now
	}
	if got > 0 && s.hadBacklog && o.Connected {
		// The sender had work since it last delivered: what it delivered over that span
		// is what it can. (Per delivery, not per step: a step sees a whole batch or none.)
		since := now.Sub(s.lastProgress).Seconds()
		rate := float64(got) / since
		c := s.Capacity()
		if c == 0 {
			c = rate
		} else {
			c += (1 - math.Exp(-since/capacityTau.Seconds())) * (rate - c)
		}
		s.capacity.Store(math.Float64bits(c))
		// A pause or an outage ends with one delivery over its whole span, which brings
		// Capacity down at once; the peak forgets no more than capacityTau of a span.
		s.capPeak = max(c, s.capPeak*math.Exp(-min(since, capacityTau.Seconds())/capPeakTau.Seconds()))
	}
	if got > 0 || !backlog {
		s.lastProgress = now
	}
	s.hadBacklog = backlog

	// Written may read a few high (a stream counts an entry Check shed before its drop) and
	// then lower: the difference is signed, so that it neither wraps (and wipes out
	// pending) nor, held at 0 for the step, counts the step's every entry as pending. After
	// a wake it is what was taken in since the wake, as the keys are counted since: the
	// entries taken in before it, which Keep did not count, would otherwise cancel out
	// entries it counted that are still pending. (An observation older than the wake has
	// nothing since it.)
	written := int64(o.Written - s.lastWritten)
	if s.woke.Swap(false) {
		written = max(0, int64(o.Written-s.wokeWritten.Load()))
	}
	s.lastWritten = o.Written
	if !s.counting.Load() {
		s.left.Store(unbounded)
		s.pending, s.peak = 0, 0
		if o.Fill > s.CountsFrom() {
			s.startCounting()
		}
		return
	}
	// The allowance as gather begins: what Keep lets through from here on is in neither
	// gather's counts nor the room, and the new allowance is applied as a change to the live
	// one so that it counts them (see below).
	before := s.left.Load()
	offered, kept := s.gather()
	// What Keep let through that the stream has not taken in yet will take room that the
	// step's Room does not show: many callers between Check and Write.
	s.pending = max(0, s.pending+float64(kept)-float64(written))
	// The flood's recent peak per step: a step's count alone can miss it while its callers
	// are off the CPU.
	s.peak = max(float64(offered), s.peak*peakDecay)
	switch room := o.Room + o.Margin - s.pending; {
	case !o.Connected || room-o.Margin >= roomySteps*max(s.peak, s.Capacity()*dt):
		// An outage (see below), or room up to Full for several steps of the flood at its
		// recent peak: no allowance, so that Keep writes nothing shared while there is no
		// need.
		s.left.Store(unbounded)
	default:
		// The allowance is the room the buffer has now, and Freed adds what the sender
		// frees: it is what fits, however late the next step, and it needs no Capacity.
		// The margin past Full is the reserve of the keys kept whole (see Keep).
		s.reserve.Store(int64(o.Margin))
		n := int64(min(max(0, room), unbounded))
		if before >= unbounded/2 {
			s.left.Store(n)
			break
		}
		// Keep's callers go on while the step runs, and a step held off the CPU after gather
		// would, storing n, promise again the room of every entry let through meanwhile, into
		// the margin. Added as a change, n keeps their count, and what Freed added. An entry let
		// through between the read of before and gather's read of its key is counted twice,
		// on the safe side, for this step: a few, or a flood's worth if the step is held off
		// the CPU in gather, which the keys kept whole then ride out on their recent counts
		// (firstFew; TestAStepHeldAfterItsCountsKeepsWhatWasLetThrough).
		s.left.Add(n - before)
	}

	switch {
	case !backlog:
		// Under the low mark: admit all, and stop counting once it has been calm a while.
		s.admitAll()
		if s.calmSince.IsZero() {
			s.calmSince = now
		}
		if now.Sub(s.calmSince) >= s.cfg.Calm {
			s.counting.Store(false)
			s.left.Store(unbounded)
		}
		return
	case !o.Connected:
		// An outage: nothing drains, so a budget from the delivery rate would shed
		// everything the buffer could still hold. Admit, with no allowance; what does not
		// fit is counted where it is dropped.
		s.admitAll()
		s.calmSince = time.Time{}
		return
	}
	s.calmSince = time.Time{}
	c := s.Capacity()
	if c == 0 {
		// Nothing measured yet (start-up, or the first batches still on their way): no
		// thinning by rate; the allowance alone keeps what fits, and what the sender took
		// in the step tells the flood from the rest (see delivery).
		s.admitAll()
		s.markFloods(offered, s.delivery(got, dt, o), dt)
		return
	}
	// What the sender takes in a step, and what the buffer can still hold up to Full:
	// everything within it would have found room. Past Full the overshoot comes off, so
	// that a capacity measured too high (the receiver just slowed down) is corrected by
	// the fill within a step, in the margin, before the buffer overflows.
	// What the sender took in the last step counts too when it is more than Capacity says:
	// a socket that takes a burst at once frees the room at once, and the allowance, not
	// the ratios, decides how much of it is used.
	budget := max(0, max(c*dt, float64(got))+o.Room)
	// The keys over their fair share of what the sender delivers are the flood, whether
	// this step thins them or not: they may fill the room, never the margin (see Keep).
	s.markFloods(offered, s.delivery(got, dt, o), dt)
	if float64(offered) <= budget {
		s.admitAll()
		return
	}
	s.share(budget, dt, s.thin)
	var admitted float64
	for _, k := range s.keys {
		admitted += float64(k.count) * float64(s.slots[k.slot].ratio.Load()) / one
	}
	s.keepRatio.Store(math.Float64bits(admitted / float64(offered)))
}

// thin sets a key's keep ratio from the step's budget, but never thins a key that is not a
// flood (markFlood): a step that saw no delivery with the buffer past Full has no budget at
// all, yet such a key's entries (a steady Warn under an Info flood) are what the margin is
// for, and the allowance alone, the room actually left, may stop them.
func (s *Shedder) thin(slot int, r uint32) {
	if !s.slots[slot].flood.Load() {
		r = one
	}
	s.setRatio(slot, r)
}

func (s *Shedder) startCounting() {
	s.calmSince = time.Time{}
	s.counting.Store(true)
}

// Wake makes Keep count keys from now on, before the next Step: for a stream whose fill
// has just jumped, so that the step that sees it has counts to share the budget by.
// written is the stream's Written at the wake (Observation.Written; a few low is safe):
// the next Step counts what was taken in after it against what Keep counted. Safe for
// concurrent use. (No snapshot of the keys is needed: while Keep does not count, the
// totals do not move, so the next Step counts from the last one.)
func (s *Shedder) Wake(written uint64) {
	if !s.counting.Load() {
		// The allowance of the last counting step is stale: none until the next step.
		s.left.Store(unbounded)
		s.wokeWritten.Store(written)
		s.woke.Store(true) // before counting: a Step that sees Keep counting sees this
		s.counting.Store(true)
	}
}

// gather collects the keys offered since the last step into s.keys and returns how many
// entries they offered and how many Keep kept since the last step: what it offered less what
// it shed, which may be negative (see below).
//
// Keep's callers go on while gather reads, and a step may be held off the CPU between any two
// reads. So a slot's drops are read before its total: every entry counts in the total before
// it is shed, so every drop read has its offer read too. An entry offered after the drops are
// read counts as kept in this step and, if it is shed, as a drop in the next one, which then
// may count fewer kept than none. Read the other way round, the drops of entries offered
// after the total counted against this step's offers: kept came up short by them, the
// allowance promised room to entries on their way into the buffer, and the flood took the
// margin (TestAStepHeldBetweenItsReadsCountsPendingRight).
func (s *Shedder) gather() (offered uint64, kept int64) {
	s.keys = s.keys[:0]
	var dropped uint64
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.lease.Load() != 0 {
			sl.lease.Store(0) // the step measures the room anew
		}
		d := sl.dropped.Load()
		dropped += d - s.seenDropped[i]
		s.seenDropped[i] = d
		if s.betweenReads != nil {
			s.betweenReads(i)
		}
		t := sl.total.Load()
		c := t - sl.base.Load()
		// The key's recent count: this step's, or half the step before's, if more. Half, so
		// that a ticker's entries falling two in one step and none in the next count as one
		// a step, not as none.
		if r := sl.recent.Load(); r != 0 || c != 0 {
			sl.recent.Store(max(c, r/2))
		}
		if c == 0 {
			// A key that has been quiet for a while comes back whole. Not after one quiet
			// step: its callers may only have been off the CPU.
			if (sl.ratio.Load() != one || sl.flood.Load()) && s.last.UnixNano()-s.seen[i] >= int64(quietAfter) {
				s.setRatio(i, one)
				s.markFlood(i, one)
			}
			continue
		}
		sl.base.Store(t)
		span := quietAfter
		if s.seen[i] != 0 {
			span = min(time.Duration(s.last.UnixNano()-s.seen[i]), quietAfter)
		}
		s.seen[i] = s.last.UnixNano()
		s.keys = append(s.keys, key{slot: i, level: sl.level.Load(), count: c, span: span})
		offered += c
	}
	return offered, int64(offered) - int64(dropped)
}

func (s *Shedder) setRatio(slot int, r uint32) { s.slots[slot].ratio.Store(r) }

// delivery is what the flood marks are shared from, entries a step: the less of what the
// sender took in the last step and what Capacity says it takes. Either alone misleads: the
// estimate lags a receiver that slows down (it is smoothed), and a flood under a stale
// estimate would count as within its share and eat the margin; a step's take is bursty (a
// socket that takes a batch at once), and a flood under one large take would too. At least
// a floor: the margin spread over the steps it must last (roomySteps), so that a step in
// which the sender took nothing (a full socket, a first connection, an ack awaited) does
// not make a steady Warn or a rare message a flood; but never more than the sender has
// been taking, once measured: against a slow receiver the margin alone can be several
// times its rate, and a flood under it would count as within its share and take the
// margin whole (TestAFloodUnderTheMarginsFloorIsStillAFlood). What the sender has been
// taking is Capacity's recent peak, not Capacity: the first delivery after a pause or an
// outage is measured over all of it, and a floor that followed Capacity down would make
// a steady Warn a flood as the sender catches up (TestAWarnStaysWholeAfterTheReceiverPauses).
func (s *Shedder) delivery(got uint64, dt float64, o Observation) float64 {
	d, floor := float64(got), o.Margin/roomySteps
	if c := s.Capacity(); c > 0 {
		d = min(d, c*dt)
		floor = min(floor, s.capPeak*dt)
	}
	return max(d, floor)
}

// markFloods marks each offered key that a share of delivery (entries a step) alone would
// thin, and unmarks the others.
func (s *Shedder) markFloods(offered uint64, delivery, dt float64) {
	if float64(offered) <= delivery {
		for _, k := range s.keys {
			s.markFlood(k.slot, one)
		}
		return
	}
	s.share(delivery, dt, s.markFlood)
}

// markFlood marks a key over its share (r < 1) as a flood at once, and unmarks it only once
// it has stayed within its share for quietAfter: a flood whose callers were off the CPU
// for a step offers little in it, and unmarked then it would take the margin whole in the
// next. A key over the floor alone (a step in which the sender took nothing) is held too;
// holding only from steps with a delivery lost rare entries under a slow receiver
// (bench/README.md, "A flood's mark held only from a step with a delivery").
func (s *Shedder) markFlood(slot int, r uint32) {
	fl := &s.slots[slot].flood
	if r < one {
		s.floodAt[slot] = s.last.UnixNano()
		if !fl.Load() {
			fl.Store(true)
		}
		return
	}
	if fl.Load() && s.last.UnixNano()-s.floodAt[slot] >= int64(quietAfter) {
		fl.Store(false)
	}
}

func (s *Shedder) admitAll() {
	for _, k := range s.keys {
		s.setRatio(k.slot, one)
	}
	s.keepRatio.Store(math.Float64bits(1))
}

// share gives each offered key a keep ratio (to set) so that the keys' kept entries add up
// to budget: levels highest first, and within the level that runs out, max-min fair.
func (s *Shedder) share(budget, dt float64, set func(slot int, r uint32)) {
	// A key's rate is taken over the time since it was last offered, not over the step
	// alone: a rare key whose callers fell behind (a ticker's two ticks at once) offers two
	// entries in one step, and a step's count would make it a flood, thinned, and its next
	// burst shed whole.
	isRare := func(k key) bool { return k.count == 1 || float64(k.count) <= rareRate*max(dt, k.span.Seconds()) }
	slices.SortFunc(s.keys, func(a, b key) int {
		if a.level != b.level {
			return int(b.level - a.level) // higher levels first
		}
		switch {
		case a.count < b.count:
			return -1
		case a.count > b.count:
			return 1
		}
		return a.slot - b.slot
	})
	// Rare keys (see rareRate) are kept whole whatever the budget:
	// a step is milliseconds, so they are rare indeed, and a budget shared out to the
	// last entry would otherwise drop them whenever the buffer is near full.
	left := budget
	for _, k := range s.keys {
		if isRare(k) {
			left -= float64(k.count)
		}
	}
	left = max(0, left)
	for start := 0; start < len(s.keys); {
		end := start
		var sum uint64
		for end < len(s.keys) && s.keys[end].level == s.keys[start].level {
			sum += s.keys[end].count
			end++
		}
		level := s.keys[start:end]
		for len(level) > 0 && isRare(level[0]) { // sorted by count: first
			set(level[0].slot, one)
			sum -= level[0].count
			level = level[1:]
		}
		if float64(sum) <= left {
			for _, k := range level {
				set(k.slot, one)
			}
			left -= float64(sum)
			start = end
			continue
		}
		// Water filling: ascending counts, each key keeps all it offered while that is
		// no more than an equal share of what is left; the rest keep the equal share.
		for i, k := range level {
			rest := float64(len(level) - i)
			if float64(k.count)*rest <= left {
				set(k.slot, one)
				left -= float64(k.count)
				continue
			}
			share := left / rest
			for _, k := range level[i:] {
				set(k.slot, ratioOf(share/float64(k.count)))
			}
			break
		}
		for _, k := range s.keys[end:] {
			r := uint32(0) // lower levels wait until this one is whole
			if isRare(k) {
				r = one
			}
			set(k.slot, r)
		}
		break
	}
}

func ratioOf(r float64) uint32 {
	if r >= 1 {
		return one
	}
	return uint32(r * one)
}

// slotOf hashes a key (the level, the tag and the message) to its slot. Tag 0 adds nothing
// to the hash: a stream without tags keys as before.
func slotOf(level int8, tag uint16, msg string) uint32 {
	h := Hash(level, msg)
	if tag != 0 {
		h ^= (uint64(tag) * 0x9E3779B97F4A7C15) >> 7
	}
	return uint32(h % Slots)
}

// Hash hashes a message at a level: eight bytes of the message at a time, multiplied and
// folded, then mixed once more (splitmix64's finisher). It is on the caller's path, for
// this package and for DegradeSample, so it reads words, not bytes (bench/README.md,
// "Figures behind the doc comments", compares it with FNV-1a). Safe for
// concurrent use; it never fails.
func Hash(level int8, msg string) uint64 {
	const m = 0x9E3779B97F4A7C15
	h := (uint64(uint8(level)) + 1) * m
	for len(msg) >= 8 {
		// The compiler makes this one 8-byte load.
		w := uint64(msg[0]) | uint64(msg[1])<<8 | uint64(msg[2])<<16 | uint64(msg[3])<<24 |
			uint64(msg[4])<<32 | uint64(msg[5])<<40 | uint64(msg[6])<<48 | uint64(msg[7])<<56
		h = (h ^ w) * m
		h ^= h >> 32
		msg = msg[8:]
	}
	for i := 0; i < len(msg); i++ {
		h = (h ^ uint64(msg[i])) * m
	}
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h
}
