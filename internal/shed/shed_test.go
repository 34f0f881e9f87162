package shed

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// pipe simulates a stream with a fake clock: callers offer entries per key at given rates,
// Keep decides, the buffer holds up to size entries, and the sender takes rate entries a
// second from it. Everything is deterministic.
type pipe struct {
	s         *Shedder
	now       time.Time
	size      float64 // buffer, in entries
	buffered  float64
	rate      float64 // what the sender can deliver, entries/s
	connected bool
	delivered uint64
	owed      float64 // the sender's drain, not yet a whole entry
	taken     uint64  // entries Keep let through, all taken in at once
	carry     map[string]float64
	lag       int     // the shedder steps every lag-th step only (0 or 1: every step)
	chunk     float64 // the sender frees whole batches of chunk entries (an ack each); 0: entry by entry
	steps     int
	spent     int // steps at whose end the allowance had run down to the margin

	// per-run tallies, by key
	offered, kept, full map[string]int
	weighed             map[string]int // the weights of the entries Keep kept
}

type load struct {
	msg   string // "message@tag" offers message with Keep's tag; no '@', with tag 0
	level int8
	rate  float64 // entries/s
}

// key names the load's key in the pipe's tallies.
func (l load) key() string { return l.msg }

// keyOf is the load's message and tag.
func (l load) keyOf() (msg string, tag uint16) {
	msg, t, ok := strings.Cut(l.msg, "@")
	if ok {
		n, _ := strconv.Atoi(t)
		tag = uint16(n)
	}
	return msg, tag
}

func newPipe(rate, size float64) *pipe {
	return &pipe{
		s:   New(Config{Low: 0.25, Full: 0.9, Calm: time.Second}),
		now: time.Unix(1_000_000, 0), size: size, rate: rate, connected: true,
		carry: map[string]float64{}, offered: map[string]int{}, kept: map[string]int{}, full: map[string]int{},
		weighed: map[string]int{},
	}
}

const step = 5 * time.Millisecond

// run advances d with the loads, one step at a time.
func (p *pipe) run(d time.Duration, loads ...load) {
	for end := p.now.Add(d); p.now.Before(end); p.now = p.now.Add(step) {
		// Spread each key's entries evenly across the step, as concurrent callers would (a
		// key with one entry offers it at the end).
		counts := make([]int, len(loads))
		var active []int // the loads with entries in this step
		most := 0
		for i, l := range loads {
			c := p.carry[l.key()] + l.rate*step.Seconds()
			counts[i] = int(c)
			p.carry[l.key()] = c - float64(counts[i])
			most = max(most, counts[i])
			if counts[i] > 0 {
				active = append(active, i)
			}
		}
		// The sender drains all through the step, as the sink's does, a share after each
		// round of offers (all of it at the end of a step with nothing offered).
		drain := func(share float64) {
			if !p.connected {
				return
			}
			p.owed += p.rate * step.Seconds() * share
			out := math.Min(p.buffered, math.Floor(p.owed))
			if p.chunk > 0 {
				// A batch at a time, once the sender has had the time to deliver it.
				if out = math.Min(p.buffered, p.chunk); p.owed < out {
					return
				}
			}
			p.owed -= out
			if p.chunk == 0 || p.buffered == 0 {
				p.owed -= math.Floor(p.owed) // no credit for a sender that had nothing to send
			}
			p.buffered -= out
			p.delivered += uint64(out)
			p.s.Freed(int(out))
		}
		for j := range most {
			for _, i := range active {
				l := loads[i]
				if (j+1)*counts[i]/most == j*counts[i]/most {
					continue
				}
				p.offered[l.key()]++
				msg, tag := l.keyOf()
				if !p.s.Keep(l.level, tag, msg) {
					continue
				}
				p.taken++
				p.weighed[l.key()] += int(p.s.Weight(l.level, tag, msg))
				if p.buffered+1 > p.size {
					p.full[l.key()]++
					continue
				}
				p.buffered++
				p.kept[l.key()]++
			}
			drain(1 / float64(most))
		}
		if most == 0 {
			drain(1)
		}
		if p.fill() > p.s.CountsFrom() {
			p.s.Wake(p.taken) // as the sink's seal does
		}
		if p.steps++; p.lag > 1 && p.steps%p.lag != 0 {
			continue
		}
		if p.s.allowance.left() <= p.s.allowance.margin.Load() {
			p.spent++
		}
		p.s.Step(Observation{Now: p.now, Fill: p.buffered / p.size, Room: 0.9*p.size - p.buffered, Margin: 0.1 * p.size, Written: p.taken, Delivered: p.delivered, Connected: p.connected})
	}
}

func (p *pipe) reset() {
	p.offered, p.kept, p.full, p.weighed = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (p *pipe) fill() float64 { return p.buffered / p.size }

// Flat out at 3× capacity: the buffer is used to the end (the fill settles at Full), what
// is kept is what the sender delivers, and nothing is dropped for a full buffer.
func TestConvergesToACapacityStep(t *testing.T) {
	p := newPipe(100_000, 40_000)
	hot := load{"hot", 0, 300_000}
	p.run(2*time.Second, hot)
	p.reset()
	p.run(2*time.Second, hot)
	if f := p.fill(); f < 0.85 || f > 0.9 {
		t.Errorf("fill %.2f after 4 s; Full is 0.90, and the budget should use it", f)
	}
	if k := float64(sum(p.kept)) / 2; math.Abs(k-100_000)/100_000 > 0.05 {
		t.Errorf("kept %.0f/s; the sender delivers 100000/s", k)
	}
	if n := sum(p.full); n != 0 {
		t.Errorf("%d entries found the buffer full in the steady state", n)
	}
	if c := p.s.Capacity(); math.Abs(c-100_000)/100_000 > 0.05 {
		t.Errorf("measured capacity %.0f/s, want about 100000", c)
	}

	// Capacity halves: within a second the kept rate follows, the buffer does not overflow.
	p.rate = 50_000
	p.reset()
	p.run(time.Second, hot)
	if n := sum(p.full); n != 0 {
		t.Errorf("capacity step down: %d entries found the buffer full", n)
	}
	p.reset()
	p.run(time.Second, hot)
	if k := float64(sum(p.kept)); math.Abs(k-50_000)/50_000 > 0.1 {
		t.Errorf("capacity step down: kept %.0f/s in the second second; the sender delivers 50000/s", k)
	}

	// And doubles again: within a second the kept rate is at least 90 % of it.
	p.rate = 100_000
	p.run(time.Second, hot)
	p.reset()
	p.run(time.Second, hot)
	if k := float64(sum(p.kept)); k < 90_000 {
		t.Errorf("capacity step up: kept %.0f/s in the second second; the sender delivers 100000/s", k)
	}
}

// The rule, on a fake clock: an entry is shed only if, admitted, it or a later entry would
// not have found room. A burst that the buffer and the sender can take between them is
// admitted whole, however fast it comes and however full it leaves the buffer.
func TestBurstThatFitsShedsNothing(t *testing.T) {
	p := newPipe(20_000, 40_000)
	p.run(time.Second, load{"warm", 0, 60_000}) // a capacity measure exists, as after a first flood
	p.run(2*time.Second, load{"idle", 0, 100})  // drained
	p.reset()
	// 80 % of the buffer offered in 50 ms, at 32× what the sender takes.
	p.run(50*time.Millisecond, load{"burst", 0, 0.8 * 40_000 / 0.05})
	p.run(3*time.Second, load{"idle", 0, 100})
	if p.offered["burst"] < 31_000 || p.kept["burst"] != p.offered["burst"] || sum(p.full) != 0 {
		t.Fatalf("burst of %d: kept %d, %d found the buffer full; want all kept", p.offered["burst"], p.kept["burst"], sum(p.full))
	}
}

// A burst of four buffers: exactly what would not fit is shed (the buffer up to Full, and
// what the sender takes meanwhile, are admitted), nothing finds the buffer full, and the
// shed entries are visible as shedding.
func TestOverflowShedsOnlyTheExcess(t *testing.T) {
	const size, rate = 40_000, 20_000
	p := newPipe(rate, size)
	p.run(time.Second, load{"warm", 0, 60_000})
	p.run(2*time.Second, load{"idle", 0, 100})
	p.reset()
	before := p.delivered
	const burst = 200 * time.Millisecond
	p.run(burst, load{"burst", 0, 4 * size / burst.Seconds()})
	fits := 0.9*size + float64(p.delivered-before) // Full, and what the sender took
	kept := float64(p.kept["burst"])
	if sum(p.full) != 0 {
		t.Errorf("%d entries found the buffer full", sum(p.full))
	}
	if math.Abs(kept-fits)/fits > 0.02 {
		t.Errorf("kept %.0f of %d offered; %.0f would have fit", kept, p.offered["burst"], fits)
	}
}

// Before the first capacity measure nothing is thinned: a start-up flood fills the buffer and
// what does not fit is dropped where it is, as it would be without a policy; a start-up
// load the buffer can hold loses nothing.
func TestNoThinningBeforeTheFirstMeasure(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.connected = false // dialing: nothing delivered yet
	p.run(100*time.Millisecond, load{"startup", 0, 5_000})
	p.connected = true
	p.run(time.Second, load{"startup", 0, 5_000}) // 5 % of capacity
	if p.kept["startup"] != p.offered["startup"] {
		t.Fatalf("start-up at 5 %% of capacity: kept %d of %d", p.kept["startup"], p.offered["startup"])
	}
	p = newPipe(100_000, 40_000)
	p.connected = false
	p.run(time.Second, load{"flood", 0, 100_000})
	if p.s.Capacity() != 0 || p.s.KeepRatio() < 1 || p.kept["flood"]+p.full["flood"] != p.offered["flood"] {
		t.Fatalf("with no capacity measured: capacity %v, keep ratio %v, kept %d + full %d of %d",
			p.s.Capacity(), p.s.KeepRatio(), p.kept["flood"], p.full["flood"], p.offered["flood"])
	}
}

// When the offered load falls under capacity, admission is back to 100 % within a second.
func TestRecoversWithinASecond(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.run(3*time.Second, load{"hot", 0, 300_000})
	if p.s.KeepRatio() >= 1 {
		t.Fatal("not shedding at 3× capacity")
	}
	var recovered time.Duration
	for d := time.Duration(0); d <= 2*time.Second; d += 10 * time.Millisecond {
		p.reset()
		p.run(10*time.Millisecond, load{"hot", 0, 50_000})
		if p.offered["hot"] > 0 && p.kept["hot"] == p.offered["hot"] {
			recovered = d
			break
		}
	}
	if recovered == 0 || recovered > time.Second {
		t.Fatalf("admission back to 100 %% after %v; want within 1 s", recovered)
	}
	p.reset()
	p.run(2*time.Second, load{"hot", 0, 50_000})
	if p.kept["hot"] != p.offered["hot"] {
		t.Errorf("under capacity, kept %d of %d", p.kept["hot"], p.offered["hot"])
	}
	p.run(2*time.Second, load{"hot", 0, 50_000})
	if p.s.Counting() {
		t.Error("still counting keys after seconds under the low mark")
	}
}

// One hot message flat out and 200 rare ones at 2/s each: every rare entry is kept.
func TestKeepsRareKeysWhole(t *testing.T) {
	p := newPipe(100_000, 40_000)
	loads := []load{{"hot", 0, 400_000}}
	for i := range 200 {
		loads = append(loads, load{fmt.Sprintf("rare %d", i), 0, 2})
	}
	p.run(2*time.Second, loads...)
	p.reset()
	p.run(5*time.Second, loads...)
	for _, l := range loads[1:] {
		if p.kept[l.msg] != p.offered[l.msg] || p.offered[l.msg] == 0 {
			t.Fatalf("%s: kept %d of %d", l.msg, p.kept[l.msg], p.offered[l.msg])
		}
	}
	if r := float64(p.kept["hot"]) / float64(p.offered["hot"]); r > 0.3 {
		t.Errorf("the hot key kept %.2f of its entries; capacity is a quarter of it", r)
	}
}

// A flood that jumps within a step outruns the ratios set at the step before: here the
// shedder steps every 50 ms (its callers and clock off the CPU) while a hot key, already
// thinned at 1.5 times the capacity, jumps to 40 times it. The step's allowance runs out, and then only a key's
// first entry in the step passes: the rare keys find room in the margin, every rare entry
// is kept, and the hot key still keeps what the sender delivers.
func TestReserveKeepsRareKeysWhenStepsLag(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.lag = 10
	var rare []load
	for i := range 200 {
		rare = append(rare, load{fmt.Sprintf("rare %d", i), 0, 2})
		p.carry[rare[i].msg] = float64(i) / 200 // spread over the half second, not at once
	}
	// A first flood measures the capacity: until then nothing is thinned, and the buffer
	// overflows as it would without a policy.
	p.run(time.Second, load{"hot", 0, 2_000_000})
	p.reset()
	p.spent = 0
	for range 5 {
		p.run(time.Second, append([]load{{"hot", 0, 150_000}}, rare...)...)
		p.run(time.Second, append([]load{{"hot", 0, 4_000_000}}, rare...)...)
	}
	if p.spent == 0 {
		t.Fatal("the allowance never ran down to the margin: the scenario does not outrun the steps")
	}
	lost := 0
	for _, l := range rare {
		lost += p.full[l.msg] + p.offered[l.msg] - p.kept[l.msg]
	}
	if lost != 0 {
		fl := 0
		for _, l := range rare {
			fl += p.full[l.msg]
		}
		t.Errorf("%d rare entries lost, %d of them to a full buffer", lost, fl)
	}
	if k := p.kept["hot"]; k < 5*100_000 {
		t.Errorf("the hot key kept %d entries in 10 s; the sender delivers 100000/s", k)
	}
}

// Max-min fairness: two keys over an equal share are cut to the same number; one under it
// is kept whole.
func TestSharesTheBudgetFairly(t *testing.T) {
	p := newPipe(100_000, 40_000)
	loads := []load{{"a", 0, 200_000}, {"b", 0, 100_000}, {"c", 0, 20_000}}
	p.run(2*time.Second, loads...)
	p.reset()
	p.run(2*time.Second, loads...)
	if p.kept["c"] != p.offered["c"] {
		t.Errorf("c, under an equal share, kept %d of %d", p.kept["c"], p.offered["c"])
	}
	a, b := float64(p.kept["a"]), float64(p.kept["b"])
	if math.Abs(a-b)/b > 0.05 || math.Abs(a-40_000*2)/80_000 > 0.1 {
		t.Errorf("a kept %.0f and b %.0f in 2 s; want about 80000 each (the 100000/s left after c, halved)", a, b)
	}
}

// Levels are served highest first: Warn is kept whole while Info is thinned, and Debug
// goes before Info.
func TestThinsLowerLevelsFirst(t *testing.T) {
	p := newPipe(100_000, 40_000)
	loads := []load{{"warn", 1, 40_000}, {"info", 0, 100_000}, {"debug", -1, 100_000}}
	p.run(2*time.Second, loads...)
	p.reset()
	p.run(2*time.Second, loads...)
	if p.kept["warn"] != p.offered["warn"] {
		t.Errorf("warn kept %d of %d", p.kept["warn"], p.offered["warn"])
	}
	if r := float64(p.kept["debug"]) / float64(p.offered["debug"]); r > 0.01 {
		t.Errorf("debug kept %.3f of its entries while info was thinned", r)
	}
	if k := float64(p.kept["info"]) / 2; math.Abs(k-60_000)/60_000 > 0.1 {
		t.Errorf("info kept %.0f/s; the 60000/s left after warn", k)
	}
}

// During an outage nothing is thinned (the buffer holds what it can and the rest is
// dropped where it does not fit); after it, the backlog drains first and admission opens
// as the capacity is seen again.
func TestOutageFillsThenDrains(t *testing.T) {
	p := newPipe(100_000, 40_000)
	hot := load{"hot", 0, 50_000}
	p.run(time.Second, hot)
	p.connected = false
	p.reset()
	p.run(2*time.Second, hot)
	if f := p.fill(); f < 0.999 {
		t.Errorf("outage: the buffer is %.3f full; it should hold all it can", f)
	}
	if p.full["hot"] == 0 || p.kept["hot"]+p.full["hot"] != p.offered["hot"] {
		t.Errorf("outage: kept %d + full %d != offered %d; nothing may be thinned", p.kept["hot"], p.full["hot"], p.offered["hot"])
	}
	p.connected = true
	p.reset()
	p.run(3*time.Second, hot)
	if f := p.fill(); f > 0.3 {
		t.Errorf("3 s after the outage the buffer is still %.2f full", f)
	}
	p.reset()
	p.run(time.Second, hot)
	if p.kept["hot"] != p.offered["hot"] {
		t.Errorf("after draining, at half the capacity, kept %d of %d", p.kept["hot"], p.offered["hot"])
	}
}

// The key table is fixed: any number of distinct keys costs no memory, and neither Keep
// nor Step allocates.
func TestBoundedAndAllocationFree(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.run(time.Second, load{"hot", 0, 300_000})
	msgs := make([]string, 100_000)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("message %d", i)
	}
	i := 0
	if a := testing.AllocsPerRun(10_000, func() { p.s.Keep(0, 0, msgs[i%len(msgs)]); i++ }); a != 0 {
		t.Errorf("Keep allocates %v times a call", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		p.now = p.now.Add(step)
		p.s.Step(Observation{Now: p.now, Fill: 0.6, Room: 1000, Delivered: p.delivered, Connected: true})
	}); a != 0 {
		t.Errorf("Step allocates %v times a call", a)
	}
	if n := cap(p.s.keys); n != Slots {
		t.Errorf("the key scratch grew to %d; the table has %d slots", n, Slots)
	}
}

// The weights of the kept entries add up to what was offered, whatever the keep ratio did
// meanwhile: the steps' ratios changing under a flood, and a spent allowance, which sheds
// more than the ratio says (a weight from the ratio alone summed to under half of a flood
// in the sink's test, TestAdaptiveShedsOnlyTheExcess). What is missing is only
// what was shed after a key's last kept entry, which the next one will carry. A key kept
// whole weighs 1.
func TestWeightsAddUpToWhatWasOffered(t *testing.T) {
	p := newPipe(100_000, 40_000)
	if w := p.s.Weight(0, 0, "hot"); w != 1 {
		t.Errorf("weight %d before any shedding, want 1", w)
	}
	loads := []load{{"hot", 0, 400_000}, {"rare", 0, 10}}
	p.run(3*time.Second, loads...)
	if p.kept["hot"] >= p.offered["hot"]/2 {
		t.Fatalf("kept %d of %d hot entries: the flood was not thinned", p.kept["hot"], p.offered["hot"])
	}
	rest := int(p.s.Weight(0, 0, "hot")) - 1 // shed since the last kept entry
	if got := p.weighed["hot"] + rest; got != p.offered["hot"] {
		t.Errorf("hot: the weights add up to %d (+ %d shed since the last kept entry); %d were offered", p.weighed["hot"], rest, p.offered["hot"])
	}
	if p.weighed["rare"] != p.offered["rare"] || p.kept["rare"] != p.offered["rare"] {
		t.Errorf("rare: %d offered, %d kept, weighing %d; want all kept, each weighing 1", p.offered["rare"], p.kept["rare"], p.weighed["rare"])
	}
}

// A receiver that stops taking entries (a stall the sender does not see as an error):
// the budget, from the capacity measured before, admits what the buffer can hold and
// sheds only as it fills up; once full, nothing is dropped for want of room except new
// keys, which are admitted whole.
func TestStallShedsOnlyWhenFull(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.run(time.Second, load{"hot", 0, 300_000})
	hot := load{"hot", 0, 20_000}
	p.run(200*time.Millisecond, hot) // the buffer drains
	p.rate = 0
	p.reset()
	var firstShed float64 = -1
	for range 200 {
		before := sum(p.offered) - sum(p.kept) - sum(p.full)
		p.run(step, hot)
		if sum(p.offered)-sum(p.kept)-sum(p.full) > before && firstShed < 0 {
			firstShed = p.fill()
		}
	}
	if firstShed >= 0 && firstShed < 0.9 {
		t.Errorf("stalled: shedding began with the buffer %.2f full; the capacity measured before covers the offered load", firstShed)
	}
	if n := sum(p.full); n > 0 {
		t.Errorf("stalled: %d entries found the buffer full; the budget is 0 before that", n)
	}
}

// Every byte of a message goes into its hash, at every length: the tail read as one
// word (overlapping the words before it) and the bytes of a short message alike; and a
// message with a trailing zero byte is another message.
func TestHashReadsEveryByte(t *testing.T) {
	msg := []byte("the quick brown fox jumps over the lazy dog, twice")
	for n := 0; n <= len(msg); n++ {
		base := string(msg[:n])
		if Hash(0, base) == Hash(0, base+"\x00") {
			t.Errorf("%q and the same with a zero byte appended hash alike", base)
		}
		if Hash(0, base) == Hash(1, base) {
			t.Errorf("%q hashes alike at two levels", base)
		}
		for i := range n {
			b := []byte(base)
			b[i] ^= 0x01
			if Hash(0, string(b)) == Hash(0, base) {
				t.Errorf("length %d: byte %d changed and the hash did not", n, i)
			}
		}
	}
}

// Keys spread over the table: 4096 messages that differ in a digit or two, at two levels,
// land in at least 60 % of the slots (uniform hashing: 63 %), none more than 8 to a slot.
func TestSlotsSpreadKeys(t *testing.T) {
	var per [Slots]int
	for _, level := range []int8{0, 1} {
		for i := range Slots / 2 {
			per[slotOf(level, 0, fmt.Sprintf("request %d handled", i))]++
		}
	}
	used, most := 0, 0
	for _, n := range per {
		if n > 0 {
			used++
		}
		most = max(most, n)
	}
	if used < Slots*60/100 || most > 8 {
		t.Errorf("%d keys in %d slots, at most %d to a slot", Slots, used, most)
	}
}

func BenchmarkSlotOf(b *testing.B) {
	for _, msg := range []string{"request handled", "Logging with some fields attached"} {
		b.Run(fmt.Sprintf("len=%d", len(msg)), func(b *testing.B) {
			for b.Loop() { // b.Loop keeps the call
				slotOf(0, 0, msg)
			}
		})
	}
}

// BenchmarkKeep is Keep while keys are counted, with room to spare (the allowance
// unlimited): a flood of one key, from a goroutine per processor (-cpu), and of a key per
// goroutine. Its figure per entry is the admission's cost on the flood's path.
func BenchmarkKeep(b *testing.B) {
	for _, keys := range []string{"one", "per-goroutine"} {
		b.Run("keys="+keys, func(b *testing.B) {
			s := New(Config{Low: 0.25, Full: 0.9, Calm: time.Second})
			s.Wake(0)
			var g atomic.Int32
			b.RunParallel(func(pb *testing.PB) {
				msg := "request handled"
				if keys != "one" {
					msg = fmt.Sprintf("request %d handled", g.Add(1))
				}
				for pb.Next() {
					if !s.Keep(0, 0, msg) {
						b.Error("shed with room to spare")
						return
					}
				}
			})
		})
	}
}

// A shedder woken by a sealed batch (Wake), before any step has measured the room, admits
// everything: there is no allowance yet. (A new shedder's allowance of zero shed the
// entries of a first burst that fitted.)
func TestWakeCarriesNoStaleAllowance(t *testing.T) {
	s := New(Config{Low: 0.25, Full: 0.9, Calm: time.Second})
	s.Wake(0)
	for i := range 20_000 {
		if !s.Keep(0, 0, "burst") {
			t.Fatalf("entry %d of a first burst shed before any step measured the room", i)
		}
	}
}

// Warn is kept whole under an Info flood, also when the steps lag: a Warn key offering more
// than a rare key (2 k/s), which the fair share keeps whole, goes on into the margin when
// the flood has spent the allowance.
func TestWarnKeptWholeUnderAnInfoFlood(t *testing.T) {
	for _, lag := range []int{1, 10} {
		p := newPipe(100_000, 40_000)
		p.lag = lag
		loads := []load{{"info", 0, 1_000_000}, {"warn", 1, 2_000}}
		p.run(time.Second, loads...)
		p.reset()
		p.run(3*time.Second, loads...)
		if p.kept["warn"] != p.offered["warn"] || p.full["warn"] != 0 {
			t.Errorf("steps every %d × 5 ms: warn kept %d of %d, %d found the buffer full", lag, p.kept["warn"], p.offered["warn"], p.full["warn"])
		}
		if k := float64(p.kept["info"]) / 3; k < 0.9*100_000-2_000 {
			t.Errorf("steps every %d × 5 ms: info kept %.0f/s; the sender delivers 100000/s, less Warn's 2000", lag, k)
		}
	}
}

// The capacity estimate lags a receiver that slows down (it is smoothed over capacityTau).
// While it is still high, a flood below it is within its "fair share of delivery" by that
// estimate, yet it is what fills the buffer: it must still be kept out of the margin, or
// the margin's keys (a steady Warn, rare messages) lose entries to it.
func TestMarginHoldsWhenTheReceiverSlowsDown(t *testing.T) {
	p := newPipe(1_500_000, 40_000)
	var rare []load
	for i := range 200 {
		rare = append(rare, load{fmt.Sprintf("rare %d", i), 0, 2})
		p.carry[rare[i].msg] = float64(i) / 200
	}
	loads := append([]load{{"hot", 0, 600_000}, {"warn", 1, 2_000}}, rare...)
	// A fast receiver first: the capacity is measured at 1.5 M/s with a backlog.
	p.run(time.Second, load{"hot", 0, 3_000_000})
	if c := p.s.Capacity(); c < 1_000_000 {
		t.Fatalf("capacity %.0f/s after a second at 1.5 M/s", c)
	}
	// Then it slows to 100 k/s, under the flood of 600 k/s: the estimate stays above the
	// flood for a while.
	p.rate = 100_000
	p.reset()
	p.run(3*time.Second, loads...)
	lost := p.offered["warn"] - p.kept["warn"] + p.full["warn"]
	for _, l := range rare {
		lost += p.offered[l.msg] - p.kept[l.msg] + p.full[l.msg]
	}
	if lost != 0 {
		t.Errorf("%d Warn and rare entries lost (Warn kept %d of %d, %d found the buffer full)", lost, p.kept["warn"], p.offered["warn"], p.full["warn"])
	}
	if k := float64(p.kept["hot"]) / 3; k < 0.8*100_000 {
		t.Errorf("the hot key kept %.0f/s; the sender delivers 100000/s", k)
	}
}

// A rare key that logs in bursts (two entries within one step, 50 ms after its last: a
// ticker that fell behind) is rare by its rate over that span, not by the step's count:
// with no budget left at all it still keeps a ratio of one, so its next burst is not shed.
func TestBurstyRareKeysStayWhole(t *testing.T) {
	s := New(Config{Low: 0.25, Full: 0.9, Calm: time.Second})
	s.keys = append(s.keys[:0],
		key{slot: 1, count: 2, span: 50 * time.Millisecond}, // bursty, 40/s
		key{slot: 2, count: 2, span: 5 * time.Millisecond},  // two a step, 400/s: a flood
		key{slot: 3, count: 5000, span: 5 * time.Millisecond})
	s.share(0, 0.005, s.setRatio)
	if r := s.slots[1].ratio.Load(); r != one {
		t.Errorf("the bursty rare key's ratio is %d, want %d (kept whole)", r, one)
	}
	if r := s.slots[2].ratio.Load(); r == one {
		t.Error("a key offering 400/s kept whole with no budget")
	}
}

// A key is a message of a tag: one tag flooding at 5 times the capacity with a message
// that seven other tags log at 1 % of the capacity each leaves those seven whole (max-min
// fair), where one key for the message would thin them all alike.
func TestAFloodOnOneTagKeepsTheOthersWhole(t *testing.T) {
	p := newPipe(100_000, 40_000)
	loads := []load{{"request handled@1", 0, 500_000}}
	for tag := 2; tag <= 8; tag++ {
		loads = append(loads, load{fmt.Sprintf("request handled@%d", tag), 0, 1_000})
	}
	p.run(2*time.Second, loads...)
	p.reset()
	p.run(5*time.Second, loads...)
	for _, l := range loads[1:] {
		if p.kept[l.key()] != p.offered[l.key()] || p.offered[l.key()] == 0 {
			t.Errorf("%s: kept %d of %d", l.key(), p.kept[l.key()], p.offered[l.key()])
		}
	}
	if r := float64(p.kept[loads[0].key()]) / float64(p.offered[loads[0].key()]); r > 0.25 {
		t.Errorf("the flooding tag kept %.2f of its entries; capacity is a fifth of it", r)
	}
	// The same message on one key: the tags are thinned alike.
	for tag := 1; tag < 8; tag++ {
		if slotOf(0, uint16(tag), "request handled") == slotOf(0, uint16(tag+1), "request handled") {
			t.Errorf("tags %d and %d share a slot", tag, tag+1)
		}
	}
	if slotOf(3, 0, "x") != uint32(Hash(3, "x")%Slots) {
		t.Error("tag 0 changes the key")
	}
}

// offer calls Keep n times for msg at level (tag 0), outside the pipe's tallies, and
// returns how many it kept.
func (p *pipe) offer(level int8, msg string, n int) int {
	kept := 0
	for range n {
		if p.s.Keep(level, 0, msg) {
			kept++
		}
	}
	return kept
}

// stepBy steps the shedder one step on, by hand: the buffer at fill with room entries up to
// Full (the pipe's margin past it), written more entries taken in and delivered more
// delivered than the pipe has counted.
func (p *pipe) stepBy(fill, room float64, written, delivered uint64) {
	p.now = p.now.Add(step)
	p.s.Step(Observation{Now: p.now, Fill: fill, Room: room, Margin: 0.1 * p.size, Written: p.taken + written, Delivered: p.delivered + delivered, Connected: true})
}

// stepHeld is stepBy (with nothing delivered) for a step held off the CPU while it counts
// the keys: Step's parts in Step's order, with at(slot) called in gather between its two
// reads of each slot (after countShed, before countOffers), while Keep's callers go on.
func (p *pipe) stepHeld(fill, room float64, written uint64, at func(slot int)) {
	p.now = p.now.Add(step)
	s := p.s
	v, counting := s.observe(Observation{Now: p.now, Fill: fill, Room: room, Margin: 0.1 * p.size, Written: p.taken + written, Delivered: p.delivered, Connected: true})
	if !counting {
		panic("stepHeld: the shedder is not counting keys")
	}
	s.keys = s.keys[:0]
	var offered, shed uint64
	for i := range s.slots {
		shed += s.countShed(i)
		at(i)
		offered += s.countOffers(i)
	}
	s.setAllowance(v, offered, int64(offered)-int64(shed))
	s.setRatios(v, offered)
}

// A step in which the sender took nothing (a socket that takes whole batches at once) with
// the buffer into its margin leaves the step no budget at all. A key within its fair share
// of what the sender delivers (a steady Warn under an Info flood) must still not be thinned
// by it: such a key's entries belong in the margin, and only the allowance, the room
// actually left, may stop them. Seen in BenchmarkDegradeRule's skew shape: ten Warn entries
// a step shed as "sampled" with the margin's room still free.
func TestKeysWithinTheirShareStayWholeWhenTheBudgetRunsOut(t *testing.T) {
	p := newPipe(290_000, 40_000)
	loads := []load{{"hot", 0, 1_500_000}, {"warn", 1, 2_000}}
	p.run(time.Second, loads...)
	if p.s.Capacity() == 0 {
		t.Fatal("no capacity measured after a second of backlog")
	}
	// One more step of offers, then a step that sees no delivery and the margin nearly
	// spent: Room is past Full by all but 200 entries of the margin.
	p.offer(0, "hot", 7_500)
	p.offer(1, "warn", 10)
	p.stepBy(0.995, 200-0.1*p.size, 7_510, 0)
	if kept := p.offer(1, "warn", 10); kept != 10 {
		t.Errorf("Warn kept %d of 10 with room for 200 entries left; its share of delivery is whole", kept)
	}
	if hot := p.offer(0, "hot", 1_000); hot != 0 {
		t.Errorf("the flood kept %d entries inside the margin", hot)
	}
}

// A flood whose callers are off the CPU for a step offers a few entries in it, and is then
// within its share. Unmarked at once, it would come back in the next step as a key kept
// whole and take the allowance down to nothing, margin included, and a steady Warn would
// lose all but its first few entries of the step. The mark holds for quietAfter.
func TestAFloodThatPausesForAStepStaysOutOfTheMargin(t *testing.T) {
	p := newPipe(290_000, 40_000)
	p.run(time.Second, load{"hot", 0, 6_000_000}, load{"warn", 1, 2_000})
	// The pause: 100 hot entries and the Warn's 10 in a step that delivered 1,450.
	p.offer(0, "hot", 100)
	p.offer(1, "warn", 10)
	p.stepBy(0.87, 1_450, 110, 1_450)
	// The flood is back: it may fill the room, not the margin.
	if hot := p.offer(0, "hot", 30_000); hot > 1_450 {
		t.Errorf("the flood kept %d entries after its pause, with room for 1450 before the margin", hot)
	}
	if warn := p.offer(1, "warn", 10); warn != 10 {
		t.Errorf("Warn kept %d of 10 after the flood came back", warn)
	}
}

// Written may read a few entries high at one step (the stream counts an entry Check shed
// before it counts the drop) and lower at the next. The entries Keep kept that are not
// taken in yet must stay pending: a difference that wrapped would count none, and the
// allowance would promise their room again.
func TestWrittenThatReadsHighOnceKeepsPending(t *testing.T) {
	p := newPipe(290_000, 40_000)
	p.run(time.Second, load{"hot", 0, 1_500_000})
	// A step with room to spare for what was offered (the keep ratio back to 1), whose
	// Written reads one entry high.
	written := uint64(p.offer(0, "hot", 100))
	p.stepBy(0.8, 10_000, written+1, 0)
	if kept := p.offer(0, "hot", 3_000); kept != 3_000 {
		t.Fatalf("kept %d of 3000 with room for 10000", kept)
	}
	// None of the 3000 is taken in yet, so the room does not show them; Written is back
	// down by the one.
	p.stepBy(0.8, 4_000, written, 0)
	// Room for 4000 up to Full less the 3000 pending: the flood, kept out of the margin,
	// has 1000 left.
	if hot := p.offer(0, "hot", 10_000); hot > 1_000 {
		t.Errorf("the flood kept %d entries with room for 1000 up to the margin", hot)
	}
}

// A flood is a key over its fair share of what the sender delivers, however small the
// margin's floor makes that look. Here a receiver takes 40 k entries/s in acked batches of
// 5,000 (one every 125 ms, nothing in the steps between), and one message is logged at
// 2.5 times that: fewer entries a step than the floor (the margin spread over roomySteps),
// which is there so that a step with no delivery does not make every key a flood. Counted
// under that floor, the hot message would be no flood: kept out of no margin, it would
// fill it to the last entry, and every rare entry would then find the buffer full.
func TestAFloodUnderTheMarginsFloorIsStillAFlood(t *testing.T) {
	p := newPipe(40_000, 160_000)
	p.chunk = 5_000
	loads := []load{{"hot", 0, 100_000}}
	for i := range 20 {
		loads = append(loads, load{fmt.Sprintf("rare %d", i), 0, 20})
		p.carry[loads[i+1].msg] = float64(i) / 20
	}
	if perStep, floor := 100_000*step.Seconds(), 0.1*p.size/roomySteps; perStep >= floor {
		t.Fatalf("the hot message offers %.0f a step, not under the floor of %.0f", perStep, floor)
	}
	p.run(3*time.Second, loads...) // the buffer fills; a capacity is measured
	p.reset()
	p.run(3*time.Second, loads...)
	lost, full := 0, 0
	for _, l := range loads[1:] {
		lost += p.offered[l.msg] - p.kept[l.msg] // shed, or found the buffer full
		full += p.full[l.msg]
	}
	if lost != 0 || p.offered["rare 0"] == 0 {
		t.Errorf("%d rare entries lost, %d of them to a full buffer", lost, full)
	}
	if k := float64(p.kept["hot"]) / 3; k < 0.9*40_000-400 {
		t.Errorf("the hot message kept %.0f/s; the sender delivers 40000/s, less the rare ones' 400", k)
	}
}

// A receiver that pauses (connected, reading nothing) or goes away for two seconds, under an
// Info flood with a steady Warn well within what it takes: the first delivery after it is
// measured over the whole pause, and the smoothed Capacity falls far below what the
// receiver takes. The floor of what counts as a flood must not follow it down, or the Warn
// is marked a flood as the sender catches up, kept out of the margin, and shed. None is
// shed; an outage, during which everything is admitted, may leave a step's Warn entries
// a full buffer.
func TestAWarnStaysWholeAfterTheReceiverPauses(t *testing.T) {
	for _, outage := range []bool{false, true} {
		p := newPipe(100_000, 40_000)
		loads := []load{{"info", 0, 1_000_000}, {"warn", 1, 4_000}}
		p.run(2*time.Second, loads...)
		p.reset()
		if outage {
			p.connected = false
		} else {
			p.rate = 0
		}
		p.run(2*time.Second, loads...)
		paused := p.offered["warn"] - p.kept["warn"]
		p.connected, p.rate = true, 100_000
		p.reset()
		p.run(2*time.Second, loads...)
		if shed := p.offered["warn"] - p.kept["warn"] - p.full["warn"]; shed != 0 || p.full["warn"] > 20 {
			t.Errorf("outage %v: %d Warn entries shed in the two seconds after it, %d found the buffer full; %d lost during it", outage, shed, p.full["warn"], paused)
		}
	}
}

// Keep counts nothing before Wake, but the stream's Written counts every entry taken in. So
// the first counting step must not take the entries written between its last step and the
// wake for entries Keep kept that are taken in already: they would cancel out entries still
// pending, and the allowance would promise their room again, into the margin.
func TestEntriesWrittenBeforeAWakeAreNotCountedAgainstPending(t *testing.T) {
	p := newPipe(100_000, 40_000)
	for range 3 { // calm: nothing counted
		p.stepBy(0.05, 0.9*p.size-2_000, 0, 0)
	}
	// 1,000 entries taken in, uncounted, then the wake; then 3,000 kept by Keep, of which
	// 1,000 are taken in by the next step, which finds room for 3,000 up to Full.
	p.taken += 1_000
	p.s.Wake(p.taken)
	if kept := p.offer(0, "hot", 3_000); kept != 3_000 {
		t.Fatalf("kept %d of 3000 before the first counting step", kept)
	}
	p.stepBy(0.8, 3_000, 1_000, 0)
	// 2,000 of the 3,000 are still to be taken in: the flood, kept out of the margin, has
	// 1,000 left.
	if hot := p.offer(0, "hot", 10_000); hot > 1_000 {
		t.Errorf("the flood kept %d entries with room for 1000 up to the margin", hot)
	}
}

// afterAFlood returns a pipe after a second of a hot flood, stepped once more by hand to
// fill with room entries up to Full and nothing pending, and the Written it gave that step
// (for the steps after, which stepBy counts from the pipe's own).
func afterAFlood(fill, room float64) (*pipe, uint64) {
	p := newPipe(290_000, 40_000)
	p.run(time.Second, load{"hot", 0, 1_500_000})
	written := uint64(p.offer(0, "hot", 100))
	p.stepBy(fill, room, written, 0)
	return p, written
}

// A step reads each key's drops and its total while the key's callers go on, and a step held
// off the CPU between the two reads must still count what is pending right. Here a flood has
// 10,000 entries kept and not yet taken in, and while the step is between its reads of the
// flood's key, 2,000 more are offered and shed (the flood is at the margin). Counted against
// the step's offers, those drops would make 2,000 of the pending entries look taken in, and
// the allowance would promise their room to the flood again. Counted in the next step, they
// must bring pending back down, or that room would be lost for good.
func TestAStepHeldBetweenItsReadsCountsPendingRight(t *testing.T) {
	p, written := afterAFlood(0.8, 10_000) // room for 10,000 up to Full, nothing pending
	if kept := p.offer(0, "hot", 10_000); kept != 10_000 {
		t.Fatalf("kept %d of 10000 with room for 10000", kept)
	}
	hot := int(slotOf(0, 0, "hot"))
	shed := 0
	// None of the 10,000 taken in yet: the room is as it was.
	p.stepHeld(0.8, 10_000, written, func(slot int) {
		if slot == hot {
			shed = 2_000 - p.offer(0, "hot", 2_000)
		}
	})
	if shed != 2_000 {
		t.Fatalf("%d of the 2000 offered during the step were shed; the test needs all", shed)
	}
	if hot := p.offer(0, "hot", 5_000); hot != 0 {
		t.Errorf("the flood kept %d entries with the room up to the margin all pending", hot)
	}
	// The next step counts the 2,000 drops, and the 5,000 just offered and shed: 10,000 are
	// pending, so the margin, 4,000, is what the keys kept whole may have.
	p.stepBy(0.8, 10_000, written, 0)
	if warn := p.offer(1, "warn", 5_000); warn != 4_000 {
		t.Errorf("a Warn kept %d entries with the margin's 4000 free", warn)
	}
}

// In the margin the allowance goes entry by entry: the keys that go on into it are the ones
// kept whole, rare ones among them with an entry or two a step, and a chunk of the allowance
// leased to each (as a flood's callers lease it, to share fewer cache lines) would hold the
// margin for entries that never come. Here 300 rare messages log one entry each, and then a
// Warn logs 3,000, with the margin's 4,000 left.
func TestTheMarginIsTakenEntryByEntry(t *testing.T) {
	p, _ := afterAFlood(1, 0) // no room up to Full: the allowance is the margin
	for i := range 300 {
		if !p.s.Keep(0, 0, fmt.Sprintf("rare %d", i)) {
			t.Fatalf("rare message %d shed with the margin free", i)
		}
	}
	if warn := p.offer(1, "warn", 3_000); warn != 3_000 {
		t.Errorf("a Warn kept %d of 3000 after 300 rare entries, with a margin of 4000", warn)
	}
}

// Keep's callers go on while a step runs, and a step held off the CPU after it has counted
// the keys must not promise again the room of the entries let through meanwhile. Here the
// buffer has room for 10,000 up to Full and nothing pending; while the step is past its
// count of the flood's key, the flood takes 6,000 of that room. The room the step then
// reads (none of the 6,000 taken in yet) still shows 10,000: stored as the allowance, it
// would let the flood take 10,000 more.
func TestAStepHeldAfterItsCountsKeepsWhatWasLetThrough(t *testing.T) {
	p, written := afterAFlood(0.8, 10_000) // room for 10,000 up to Full, nothing pending
	hot := int(slotOf(0, 0, "hot"))
	if hot == Slots-1 {
		t.Fatal("the flood's key is in the last slot; the test needs a later one")
	}
	late := 0
	p.stepHeld(0.8, 10_000, written, func(slot int) {
		if slot == Slots-1 { // the flood's key is counted already
			late = p.offer(0, "hot", 6_000)
		}
	})
	if late != 6_000 {
		t.Fatalf("the flood kept %d of 6000 during the step, with room for 10000", late)
	}
	if more := p.offer(0, "hot", 20_000); more > 4_000 {
		t.Errorf("after 6000 during the step, the flood kept %d more with room for 10000", more)
	}
	// The next step counts the 6,000 with the rest: the room up to Full is all pending, and
	// the margin is the Warn's.
	p.stepBy(0.8, 10_000, written, 0)
	if warn := p.offer(1, "warn", 5_000); warn != 4_000 {
		t.Errorf("a Warn kept %d entries with the margin's 4000 free", warn)
	}
}

// A step held off the CPU before it has counted the flood's key (a caller that steps, on a
// core shared with the flood) must not count the entries let through meanwhile twice: once
// as taken from the allowance it changes, again as pending. Here the buffer has room for
// 10,000 up to Full and nothing pending; before the step reads the flood's key, the flood
// takes 6,000 of that room. 4,000 are left for it after the step, not none.
func TestAStepHeldBeforeItsCountsLeavesTheRoomLeft(t *testing.T) {
	p, written := afterAFlood(0.8, 10_000) // room for 10,000 up to Full, nothing pending
	hot := int(slotOf(0, 0, "hot"))
	early := 0
	p.stepHeld(0.8, 10_000, written, func(slot int) {
		if slot == hot { // the flood's key is not counted yet
			early = p.offer(0, "hot", 6_000)
		}
	})
	if early != 6_000 {
		t.Fatalf("the flood kept %d of 6000 during the step, with room for 10000", early)
	}
	if more := p.offer(0, "hot", 20_000); more < 4_000-leaseChunk || more > 4_000 {
		t.Errorf("after 6000 during the step, the flood kept %d more with room for 10000", more)
	}
}

// Once the allowance is spent, a key kept whole passes as many entries a step as it offered
// lately, not only its first few: it is within its share of what the sender delivers, and
// an allowance read short for a step (a batch between the free list and a shard is counted
// in the room a step late) must not shed a steady Warn. A key new to the step passes its
// first few, and the flood none.
func TestAKeyKeptWholePassesItsRecentCountPastASpentAllowance(t *testing.T) {
	p := newPipe(290_000, 40_000)
	p.run(time.Second, load{"hot", 0, 1_500_000}, load{"warn", 1, 4_000})
	kept := p.offer(1, "warn", 20) + p.offer(0, "hot", 100)
	p.stepBy(1, -0.1*p.size, uint64(kept), 0) // past Full by the margin: no allowance at all
	if p.s.allowance.left() != 0 {
		t.Fatalf("allowance %d past the margin", p.s.allowance.left())
	}
	if w := p.offer(1, "warn", 30); w != 20 {
		t.Errorf("a Warn of 20 entries a step kept %d of 30 with the allowance spent; want 20", w)
	}
	if f := p.offer(1, "fresh", 30); f != firstFew {
		t.Errorf("a key new to the step kept %d of 30 with the allowance spent; want %d", f, firstFew)
	}
	if h := p.offer(0, "hot", 1_000); h != 0 {
		t.Errorf("the flood kept %d with the allowance spent", h)
	}
}

// A step reads only the slots offered since the step before and those it watches: a key
// thinned as a flood that then goes quiet still comes back whole after quietAfter, while
// another key floods and nothing is offered to it.
func TestAQuietFloodComesBackWhole(t *testing.T) {
	p := newPipe(100_000, 40_000)
	p.run(time.Second, load{"flood", 0, 300_000})
	if p.s.Whole(0, 0, "flood") {
		t.Fatal("the flood was not thinned: nothing to come back from")
	}
	p.run(quietAfter+10*step, load{"other", 0, 300_000})
	if !p.s.Whole(0, 0, "flood") {
		t.Errorf("after %v quiet the flood's key is not whole: ratio %d, flood %v",
			quietAfter+10*step, p.s.slots[slotOf(0, 0, "flood")].ratio.Load(), p.s.slots[slotOf(0, 0, "flood")].flood.Load())
	}
	for w, bits := range p.s.watched {
		if bits != 0 && w != int(slotOf(0, 0, "other"))/64 {
			t.Errorf("the steps still watch slots %#x of word %d, offered nothing lately", bits, w)
		}
	}
}

// BenchmarkStep is one step of a shedder counting keys, with one key offered in it: its cost
// follows the keys offered, not the table's size.
func BenchmarkStep(b *testing.B) {
	s := New(Config{Low: 0.25, Full: 1 - 1.0/64, Calm: time.Second})
	now := time.Unix(1_000_000, 0)
	var written, delivered uint64
	observe := func() Observation {
		return Observation{Now: now, Fill: 0.5, Room: 10_000, Margin: 500, Written: written, Delivered: delivered, Connected: true}
	}
	s.Wake(0)
	s.Step(observe())
	for b.Loop() {
		for range 100 {
			if s.Keep(0, 0, "request handled") {
				written++
			}
		}
		delivered += 90
		now = now.Add(step)
		s.Step(observe())
	}
}

// Each slot is a cache line of its own, so that callers of different keys, and the step
// reading one key, never write or read one line for two keys; and the allowance, which
// callers write, shares no line with the fields they only read.
func TestEachSlotIsACacheLine(t *testing.T) {
	s := New(Config{Low: 0.25, Full: 0.9, Calm: time.Second})
	if size := unsafe.Sizeof(slot{}); size != 64 {
		t.Errorf("a slot is %d bytes, not a cache line's 64", size)
	}
	if at := uintptr(unsafe.Pointer(&s.slots[0])); at%64 != 0 {
		t.Errorf("the first slot is at %#x, %d bytes into a cache line", at, at%64)
	}
	for name, l := range map[string]*lone{"limit": &s.allowance.limit, "spent": &s.allowance.spent} {
		at, start := uintptr(unsafe.Pointer(&l.Int64)), uintptr(unsafe.Pointer(l))
		if at-start < 64 || start+unsafe.Sizeof(*l)-at < 64 {
			t.Errorf("the allowance's %s is %d bytes after the field before it and %d before the next", name, at-start, start+unsafe.Sizeof(*l)-at)
		}
	}
}

// A key kept whole pays the allowance a chunk at a time, for exactly the entries it then
// lets through; and once it has gone on entry by entry (the allowance short of a chunk), a
// chunk taken after room is freed pays for its own entries only, not for those already
// paid one by one.
func TestALeasePaysForWhatItCovers(t *testing.T) {
	p, _ := afterAFlood(0.5, 10_000)
	s := p.s
	before := s.allowance.left()
	if !s.allowance.limited() {
		t.Fatal("the allowance is unlimited: nothing to pay")
	}
	if kept := p.offer(1, "steady", 3*leaseChunk); kept != 3*leaseChunk {
		t.Fatalf("kept %d of %d with room for 10,000", kept, 3*leaseChunk)
	}
	if paid := before - s.allowance.left(); paid != 3*leaseChunk {
		t.Errorf("%d entries let through in whole leases paid %d of the allowance", 3*leaseChunk, paid)
	}
	// Bring the allowance to within a chunk of the margin: entries then pay one by one.
	s.allowance.limit.Add(s.allowance.margin.Load() + leaseChunk/2 - s.allowance.left())
	p.offer(1, "steady", 5*leaseChunk)
	s.Freed(10 * leaseChunk)
	before = s.allowance.left()
	p.offer(1, "steady", 1)
	if paid := before - s.allowance.left(); paid != leaseChunk {
		t.Errorf("the first lease after %d entries paid one by one paid %d of the allowance, not %d", 5*leaseChunk, paid, leaseChunk)
	}
}

// Entries that went on one by one, or were not let through, just before a lease are not
// paid for again by it: here a key pays for 8 entries one by one with the allowance short
// of a chunk, and the lease taken once room is freed pays for its own chunk only.
func TestALeaseDoesNotPayForTheEntriesJustBefore(t *testing.T) {
	p, _ := afterAFlood(0.5, 10_000)
	s := p.s
	s.allowance.limit.Add(s.allowance.margin.Load() + leaseChunk/2 - s.allowance.left())
	before := s.allowance.left()
	if kept := p.offer(1, "steady", 8); kept != 8 {
		t.Fatalf("kept %d of 8 with %d of the allowance past the margin", kept, leaseChunk/2)
	}
	if paid := before - s.allowance.left(); paid != 8 {
		t.Fatalf("8 entries one by one paid %d", paid)
	}
	s.Freed(10 * leaseChunk)
	before = s.allowance.left()
	p.offer(1, "steady", 1)
	if paid := before - s.allowance.left(); paid != leaseChunk {
		t.Errorf("the lease after 8 entries paid one by one paid %d of the allowance, not %d", paid, leaseChunk)
	}
}
