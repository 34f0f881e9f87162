package fluentcore

import (
	"fmt"
	"io"
	"math/rand/v2"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The fault suite's low-rate outage rows (issue 14): a service logging at a modest rate,
// with the default configuration, through an outage of tens of seconds. Unlike the other
// rows, these run in real time at the given rates: what they check is how the buffers hold
// up over time, which a burst of entries cannot show. For each:
//
//   - no err entry goes to ErrFallback, and no Error() call waits for room (the err stream's
//     wait count stays 0), while the budget has room;
//   - no info entry is dropped before the bytes buffered reach the degrade policy's high
//     watermark (and none queue_full before 90 % of the budget);
//   - the heap grows by no more than the buffer budget (plus slack) during the outage;
//   - after the receiver is back, every err entry is delivered, in order within the stream.
type outageRow struct {
	name     string
	ack      bool
	length   time.Duration // of the outage
	errRate  int           // err entries a second
	infoRate int           // info entries a second
	fault    outageFault
}

type outageFault int

const (
	outageDown  outageFault = iota // refuses connections and drops the open ones
	outageFlap                     // down, then up, each for 1–3 s, repeatedly
	outageStall                    // accepts and keeps its connections, reads nothing
)

// outagePad makes an entry about 660 bytes encoded, as in the reproduction.
var outagePad = strings.Repeat("o", 580)

func outageRows() []outageRow {
	return []outageRow{
		{name: "receiver down 30 s, err at 200/s (≈ the err budget)", length: 30 * time.Second, errRate: 200, fault: outageDown},
		{name: "receiver down 30 s, info at 2 k/s (5× the info budget)", length: 30 * time.Second, infoRate: 2000, fault: outageDown},
		{name: "receiver down then up every 1–3 s for 60 s, err 100/s, info 500/s", ack: true, length: 60 * time.Second, errRate: 100, infoRate: 500, fault: outageFlap},
		{name: "receiver stalls (reads nothing) 30 s, err 100/s, info 500/s", ack: true, length: 30 * time.Second, errRate: 100, infoRate: 500, fault: outageStall},
	}
}

// outageCases are the rows as fault cases, run by runOutageRow.
func outageCases() []faultCase {
	var cases []faultCase
	for _, r := range outageRows() {
		cases = append(cases, faultCase{name: r.name, ack: r.ack, run: func(t *testing.T, c *faultCase) faultResult {
			return runOutageRow(t, c, r)
		}})
	}
	return cases
}

// outageLog paces err and info entries at their rates from one goroutine, as a service's
// handlers would at a low rate, and measures every call.
type outageLog struct {
	core               *Core
	logger             *zap.Logger
	w                  *faultWorkload
	errRate, infoRate  int
	start              time.Time
	nerr, ninfo        int
	slowest            [2]time.Duration // info, err
	overMs             int              // calls that took over 1 ms
	firstDrop          float64          // info fill share when the first info entry was dropped; -1 if none
	firstQueueFull     float64          // the same for the first queue_full drop
	maxBuffered        [numStreams]int64
	infoSt, errSt      *stream
	droppedSeen        uint64
	queueFullSeen      uint64
	errWaitsWhileRoom  uint64
	errRoomAtFirstWait float64
}

func newOutageLog(core *Core, errRate, infoRate int) *outageLog {
	s := sinkOf(core)
	return &outageLog{
		core: core, logger: zap.New(core, zap.ErrorOutput(zapcore.AddSync(io.Discard))), w: &faultWorkload{},
		errRate: errRate, infoRate: infoRate, start: time.Now(), firstDrop: -1, firstQueueFull: -1,
		infoSt: s.streams[infoStream], errSt: s.streams[errStream], errRoomAtFirstWait: -1,
	}
}

// catchUp logs what the rates call for by now.
func (o *outageLog) catchUp(now time.Time) {
	el := now.Sub(o.start).Seconds()
	for o.nerr < int(el*float64(o.errRate)) {
		fill := fillOf(o.errSt)
		waits := o.errSt.waits.Load()
		id := faultID(0, o.nerr)
		t0 := time.Now()
		o.logger.Error("outage", zap.Int64("id", id), zap.String("pad", outagePad))
		o.measure(1, time.Since(t0))
		o.w.err = append(o.w.err, id)
		o.nerr++
		if o.errSt.waits.Load() != waits && fill < 0.9 {
			o.errWaitsWhileRoom++
			if o.errRoomAtFirstWait < 0 {
				o.errRoomAtFirstWait = fill
			}
		}
		o.maxBuffered[errStream] = max(o.maxBuffered[errStream], o.errSt.buffered())
	}
	for o.ninfo < int(el*float64(o.infoRate)) {
		fill := fillOf(o.infoSt)
		id := faultID(1, o.ninfo)
		t0 := time.Now()
		if o.ninfo%10 == 1 {
			o.logger.Warn("outage", zap.Int64("id", id), zap.String("pad", outagePad))
		} else {
			o.logger.Info("outage", zap.Int64("id", id), zap.String("pad", outagePad))
		}
		o.measure(0, time.Since(t0))
		o.w.info = append(o.w.info, id)
		o.ninfo++
		o.maxBuffered[infoStream] = max(o.maxBuffered[infoStream], o.infoSt.buffered())
		st := o.core.Stats().Info
		if d := st.DroppedTotal(); d != o.droppedSeen {
			o.droppedSeen = d
			if o.firstDrop < 0 {
				o.firstDrop = fill
			}
		}
		if q := st.Dropped[dropQueueFull.String()]; q != o.queueFullSeen {
			o.queueFullSeen = q
			if o.firstQueueFull < 0 {
				o.firstQueueFull = fill
			}
		}
	}
}

// fillOf is the share of a stream's buffer budget in use, in bytes.
func fillOf(st *stream) float64 { return float64(st.buffered()) / float64(st.capacity()) }

func (o *outageLog) measure(kind int, d time.Duration) {
	o.slowest[kind] = max(o.slowest[kind], d)
	if d > time.Millisecond {
		o.overMs++
	}
}

// liveHeap is the heap the last garbage collection found live: read without forcing one,
// which would stop the callers being measured.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

func runOutageRow(t *testing.T, c *faultCase, r outageRow) faultResult {
	e := &faultEnv{t: t, c: c, reg: prometheus.NewRegistry(), fb: newFallbackLog(), ev: &eventLog{}, stop: make(chan struct{})}
	t.Cleanup(e.stopChaos)
	e.startReceiver()
	// The defaults, as a user who reads no docs has them.
	e.cfg = Config{Addr: e.addr, Tag: "shop", RequireAck: r.ack, ErrFallback: e.fb, Registerer: e.reg}
	e.core = New(e.cfg)
	t.Cleanup(func() { _ = e.core.Close() })
	e.watchErrors()
	st := sinkOf(e.core).streams
	budget := uint64(st[infoStream].capacity() + st[errStream].capacity())
	hw := e.core.s.degrade.HighWatermark

	o := newOutageLog(e.core, r.errRate, r.infoRate)
	// One second healthy, so the connections exist when the fault comes.
	for time.Since(o.start) < time.Second {
		o.catchUp(time.Now())
		time.Sleep(5 * time.Millisecond)
	}
	e.settle()
	heldBefore := e.recv.Len()
	before := heapAlloc()
	var maxGrowth int64

	down := func() { mustDo(t, e.recv.SetRefuse(true)); e.recv.CloseConnections() }
	up := func() { mustDo(t, e.recv.SetRefuse(false)) }
	switch r.fault {
	case outageDown, outageFlap:
		down()
	case outageStall:
		e.recv.Stall()
	}
	rng := rand.New(rand.NewPCG(14, uint64(r.fault)))
	isDown, flips := true, 0
	nextFlip := time.Now().Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
	injected := time.Now()
	lastHeap := time.Now()
	for now := time.Now(); now.Sub(injected) < r.length; now = time.Now() {
		o.catchUp(now)
		if r.fault == outageFlap && now.After(nextFlip) {
			if isDown {
				up()
			} else {
				down()
			}
			isDown, flips = !isDown, flips+1
			nextFlip = now.Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		}
		if now.Sub(lastHeap) > 100*time.Millisecond {
			lastHeap = now
			held := 0
			for _, rc := range e.all {
				held += rc.Len()
			}
			// The receiver's entries are in the heap too; only the client's share is bounded.
			maxGrowth = max(maxGrowth, int64(liveHeap())-int64(before)-int64((held-heldBefore)*faultHeapPerEntry))
		}
		time.Sleep(5 * time.Millisecond)
	}
	held := 0
	for _, rc := range e.all {
		held += rc.Len()
	}
	maxGrowth = max(maxGrowth, int64(heapAlloc())-int64(before)-int64((held-heldBefore)*faultHeapPerEntry))
	if maxGrowth > int64(budget+faultHeapSlack) {
		t.Errorf("the heap grew by %d bytes (the receiver's entries aside) during the outage; budget %d + slack %d", maxGrowth, budget, faultHeapSlack)
	}
	switch r.fault {
	case outageDown, outageFlap:
		up()
	case outageStall:
		e.recv.Resume()
	}

	if n := len(e.fb.idSet()); n > 0 {
		t.Errorf("%d err entries went to ErrFallback during the outage", n)
	}
	if o.errWaitsWhileRoom > 0 {
		t.Errorf("%d Error() calls waited for room with the err buffer under 90 %% full (the first at %.0f %%)", o.errWaitsWhileRoom, 100*o.errRoomAtFirstWait)
	}
	// With the receiver down, DegradeAdaptive (the default) sheds nothing: the buffer holds
	// what it can, and entries are dropped (queue_full) only once it is full. Otherwise no
	// drop comes before the degrade watermark.
	first := hw
	if r.fault == outageDown {
		first = 0.9
	}
	if o.firstDrop >= 0 && o.firstDrop < first-0.01 {
		t.Errorf("the first info drop came with the buffer %.1f %% full; want at least %.0f %%", 100*o.firstDrop, 100*first)
	}
	if o.firstQueueFull >= 0 && o.firstQueueFull < 0.9 {
		t.Errorf("the first queue_full drop came with the buffer %.1f %% full", 100*o.firstQueueFull)
	}

	waitUntil(t, "everything logged is delivered", func() bool {
		if e.core.Sync() != nil {
			return false
		}
		_, errs := e.received()
		return len(errs) == len(o.w.err)
	})
	if err := e.core.Close(); err != nil {
		t.Errorf("Close after the outage: %v", err)
	}
	e.unwatchErrors()
	final := e.core.Stats()
	identityHolds(t, final)
	res := checkDelivery(t, e, o.w, final, 0)
	for _, tag := range []string{"shop.err", "shop.info"} {
		if bad := outOfOrder(e, tag); bad != "" {
			t.Errorf("%s entries arrived out of order: %s", tag, bad)
		}
	}
	did := fmt.Sprintf("buffered at most %s of %s err and %s of %s info; slowest Error() %s, Info() %s; %d calls over 1 ms",
		mib(o.maxBuffered[errStream]), mib(st[errStream].capacity()), mib(o.maxBuffered[infoStream]), mib(st[infoStream].capacity()),
		o.slowest[1].Round(time.Microsecond), o.slowest[0].Round(time.Microsecond), o.overMs)
	if r.fault == outageFlap {
		did += fmt.Sprintf("; %d flips", flips)
	}
	res.did = describe(final, e.seen, 0, did)
	t.Logf("%s; heap growth at most %d of budget %d", res.did, maxGrowth, budget)
	return res
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// outOfOrder returns the first pair of the stream's ids that arrived out of order, counting
// each id where it first arrived (a retried frame may repeat entries), or "".
func outOfOrder(e *faultEnv, tag string) string {
	seen := map[int64]bool{}
	var last int64 = -1
	for _, rc := range e.all {
		for _, en := range rc.Entries() {
			if en.Tag != tag {
				continue
			}
			id, _ := en.Record["id"].(int64)
			if seen[id] {
				continue
			}
			seen[id] = true
			if id < last {
				return fmt.Sprintf("%#x after %#x", id, last)
			}
			last = id
		}
	}
	return ""
}
