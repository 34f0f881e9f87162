// Package shed decides which entries a stream keeps when its callers offer more than its
// sender can deliver and its buffer can hold: the adaptive degrade policy. It imports no
// other fluentcore package (see ARCHITECTURE.md).
//
// # The rule
//
// An entry is shed only when, had it been admitted, it or a later entry would have found
// the buffer full; and then the shedding is fair. Two limits keep it, one set per step and
// one counted entry by entry:
//
//   - Each step (Step, every few milliseconds) sets a keep ratio per key. While the entries
//     offered in the step are within the budget — what the sender takes in a step plus the
//     room left — every ratio is 1, however full the buffer is. Past it, the budget is
//     shared out fairly over the keys, and a flood keeps its share of what it offered.
//   - The allowance is the room left, counted down by every entry Keep admits and up by
//     every entry the sender frees (Freed). It stops exactly what would not fit, whatever
//     the ratios, however late the next step comes, and with no Capacity measured yet. Its
//     last part, the margin, is for the keys kept whole: a key the step thins, or a
//     flood, stops where it begins.
//
// # Names
//
// A key is a message at a level of a logger tag, counted in a fixed table of Slots slots
// (table.go). The numbers Step reads come in an Observation; the rest it measures.
//
//   - step: one call of Step; dt, its length in seconds; got, the entries the sender
//     delivered since the step before.
//   - Capacity: the sender's delivery rate in entries a second, measured while the buffer
//     held a backlog (the fill above Config.Low) and smoothed; 0 until first measured.
//   - room (Observation.Room): the entries the buffer can still take up to Config.Full,
//     negative past it, as the stream read it. The budget counts it as read; the
//     allowance takes pending off it.
//   - margin (Observation.Margin): the entries the buffer holds between Config.Full and its
//     end.
//   - pending: the entries Keep admitted that the stream has not taken in yet
//     (Observation.Written does not count them), whose room the room still shows.
//   - budget: the entries a step may admit, max(Capacity × dt, got) + room, at least 0
//     (budget): the sender's take by the higher of its two readings, and the room.
//   - delivery: the sender's take by the lower of its two readings, min(Capacity × dt,
//     got), at least a floor (delivery): what the flood marks are shared from.
//   - keep ratio: the share of a key's entries Keep lets through, from one (all) down;
//     systematic, not random: the n-th entry is kept when ⌊n·ratio⌋ moves.
//   - flood: a key over its fair share of delivery, marked so for at least quietAfter
//     (markFlood). A key that is not a flood is never thinned (thin).
//   - kept whole: a key with a keep ratio of one that is not a flood (Whole).
//   - rare key: a key offered once in the step, or at no more than rareRate a second;
//     always kept whole.
//   - fair: max-min over the keys of one level, levels served highest first: a key
//     offering less than an equal share of what is left is kept whole, the rest keep an
//     equal share each (share). Warn is thinned only once Info and Debug have nothing left.
//   - allowance: the entries Keep may still let through: the room and the margin less
//     pending, as the last step read them, counted down by Keep, up by Freed; in the code
//     allowance.left, limit - spent: the steps and Freed move limit, and Keep's entries add
//     what they take to spent, and to their key's own spent. A key the step thins, or a
//     flood, takes it down to the margin; a key kept whole to nothing, and past that passes
//     its first few entries of the step, or its recent count (firstFew).
//   - unlimited: the allowance while Keep needs none: keys are not counted, the sender is
//     disconnected (nothing frees room, and what does not fit is dropped where it is
//     counted), or the room holds several steps of the flood at its recent peak
//     (roomySteps). Keep then writes nothing shared.
//   - calm: the fill at or under Config.Low; after Config.Calm of it, keys are no longer
//     counted and Keep is one atomic load again.
//
// Keep's callers go on while a step runs, and a step may be held off the CPU anywhere in
// it. So a step reads each key's shed count before its offers (every shed entry it counts
// has its offer counted too), and what the key's entries took of the allowance right after
// its offers; the new allowance is the room less what was taken and not read with the
// counts. An entry let through while the step runs is thus counted once, before or after
// its key's read: counted twice, a flood's entries during a held step would shed what
// fits; not at all, the room of entries on their way into the buffer would be promised
// again, and the flood would take the margin.
package shed

import (
	"math"
	"sync/atomic"
	"time"
)

// Config sets the controller's marks, as shares of the buffer budget (0..1).
type Config struct {
	// Low is the fill under which the stream is calm: keys are counted from half of it
	// on, and no longer once the fill has stayed at or under it for Calm. Capacity is
	// measured only while the fill is above it (the sender then has a backlog).
	Low float64
	// Full is the fill up to which the budget admits the flood; the rest is the margin
	// for the keys kept whole. Above Low, at most 1.
	Full float64
	// Calm is how long the buffer must stay at or below Low, connected, before keys stop
	// being counted (Keep is one atomic load again).
	Calm time.Duration
}

// Shedder is one stream's adaptive admission. Keep, Whole, Weight, Unweigh, Freed, Wake
// and the gauges are safe for concurrent use and allocation-free; Step must be called from
// one goroutine at a time. The stream's side of the contract is on Observation.
type Shedder struct {
	// slots is the key table: per key, written by Keep, read and reset by Step. It comes
	// first, and a slot is a cache line: a Shedder is larger than any size class, so
	// New's allocation starts a page of its own, and each slot has a line to itself.
	slots [Slots]slot
	// touched has a bit per slot, set by Keep once it has written the slot's counts for
	// an entry, and cleared by the step that then reads them (gather): every count Keep
	// writes is read by a step that clears the slot's bit after the write. So a step reads
	// only the slots offered since the one before, and those it still watches.
	touched slotSet

	cfg Config
	// counting: Keep counts keys and applies the keep ratios and the allowance. Set by
	// Wake, or by a step that finds the fill above CountsFrom; cleared by a step once the
	// buffer has been calm for Config.Calm. While it is false Keep admits all and writes
	// nothing, so the slots' counts stand still.
	counting atomic.Bool

	// Set by Wake for the next step: woke says wokeWritten is the stream's Written when
	// Keep began counting. woke is stored before counting, so a step that sees Keep
	// counting since a wake sees woke.
	woke        atomic.Bool
	wokeWritten atomic.Uint64

	// Written by Step, read by Keep and the gauges.
	capacity  atomic.Uint64 // float64 bits: Capacity, entries/s; 0 until measured, then > 0
	keepRatio atomic.Uint64 // float64 bits: the share of the last step's offers its ratios keep, 0..1
	// allowance: written by Keep (take), Freed and Step (set).
	allowance allowance

	// Step's own, read and written by Step alone.
	stepAt       time.Time          // the last step's Observation.Now; zero before the first
	delivered    uint64             // Observation.Delivered at the last step
	written      uint64             // Observation.Written at the last step
	progressAt   time.Time          // the last step at which the sender had delivered since the one before, or had no backlog
	hadBacklog   bool               // the fill was above Config.Low at the last step
	calmSince    time.Time          // the first step of the current calm; zero while not calm
	pending      float64            // ≥ 0: entries Keep admitted that Written has not counted yet
	capacityPeak float64            // Capacity's recent peak, ≥ Capacity, forgetting slowly (see delivery)
	offeredPeak  float64            // the most offered in a step, decaying by peakDecay a step; reset by a step that finds keys not counted
	offeredAt    [Slots]int64       // unix nanos of the last step at which each slot had offers; 0 if never
	floodAt      [Slots]int64       // unix nanos of the last step at which each slot was over its share of delivery
	shedAtStep   [Slots]uint64      // each slot's shed count as the last step read it
	spentAtStep  [Slots]int64       // each slot's spent as the last step read it
	spentRead    int64              // the sum of spentAtStep: what the entries the steps counted took of the allowance
	watched      [Slots / 64]uint64 // a bit per slot a step must read though nothing was offered to it: not at rest (slot.atRest)
	keys         []key              // scratch, capacity Slots: the keys offered since the last step
}

// lone is an atomic counter on a cache line of its own: Keep's callers, the sender or the
// steps write it while every caller reads the fields around it.
type lone struct {
	_ [64]byte
	atomic.Int64
	_ [56]byte
}

// unlimited is the limit while Keep needs none: no flood spends it, and Freed adds
// nothing to it.
const unlimited = math.MaxInt64 / 2

// New returns a Shedder that admits everything until a step sees a backlog.
func New(cfg Config) *Shedder {
	s := &Shedder{cfg: cfg, keys: make([]key, 0, Slots)}
	for i := range s.slots {
		s.slots[i].ratio.Store(one)
	}
	s.keepRatio.Store(math.Float64bits(1))
	s.allowance.unlimit()
	return s
}

// CountsFrom is the fill from which keys are counted: half the low mark, so that the
// counts are there when the fill reaches it (a flood crosses the rest within a step).
// Whoever wakes the shedder (Wake) on a fill uses it too. Safe for concurrent use.
func (s *Shedder) CountsFrom() float64 { return s.cfg.Low / 2 }

// Counting reports whether Keep is counting keys (the buffer has been above the low mark
// recently): the caller then calls Keep; otherwise it may skip it. Safe for concurrent use.
func (s *Shedder) Counting() bool { return s.counting.Load() }

// Capacity is the delivery rate measured while the buffer held a backlog, in entries per
// second, smoothed; 0 until measured. Safe for concurrent use.
func (s *Shedder) Capacity() float64 { return math.Float64frombits(s.capacity.Load()) }

// KeepRatio is the share of the entries offered in the last step that the keep ratios let
// through (1 when nothing was thinned). Safe for concurrent use.
func (s *Shedder) KeepRatio() float64 { return math.Float64frombits(s.keepRatio.Load()) }
