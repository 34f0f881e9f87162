package main

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/fluentcore/fluentcore"
)

// doc renders the results as markdown.
type doc struct{ rs *results }

// ref is the reference contender: ratios are to its ns/op in the same run, scenario and mode.
const ref = "zap-json-discard"

// contenders, in table order, with what each row is.
var contenders = []struct{ name, what string }{
	{"fluentcore", "fluentcore with its default configuration (info tag `app.access`), `zap.New(core)`"},
	{"fluentcore-degrade-off", "the same with `Degrade.Policy = DegradeOff`: info entries are dropped only when every buffer is full (`queue_full`)"},
	{ref, "zap's production JSON core writing to `io.Discard`: the encoding floor, the reference (1.00×)"},
	{"zap-json-bws-tcp", "zap's JSON core → `BufferedWriteSyncer` (256 KiB) → TCP, as wired by hand; the receiver counts lines"},
	{"fluent-logger-async", "`github.com/fluent/fluent-logger-golang` v1.10.2, `Async`, `Post` with a map, sub-second time"},
	{"fluent-logger-sync", "the same, synchronous"},
	{"fluent-logger-async-ack", "the same, `Async` and `RequestAck`"},
	{"lestrrat-fluent-client", "`github.com/lestrrat-go/fluent-client` v1.0.0, buffered (its default), `Post` with a map"},
	{"ibm-fluent-forward-go", "`github.com/IBM/fluent-forward-go` v0.4.0, `SendMessageExt` with a map; its own binary (`-tags ibm`), ratio to that binary's zap row"},
}

var scenarios = []string{"AddingFields", "AccumulatedContext", "WithoutFields", "Sugar"}

func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// lookup finds a contender's group for bench and keys, in the main run or else the ibm run,
// and the reference group of the same run.
func (d *doc) lookup(bench, contender string, keys map[string]string) (g, r *group) {
	for _, file := range []string{"main", "ibm"} {
		if g = d.rs.find(file, bench, with(keys, "contender", contender)); g != nil {
			return g, d.rs.find(file, bench, with(keys, "contender", ref))
		}
	}
	return nil, nil
}

// med returns the formatted median of unit, or "—".
func med(g *group, unit string, f func(float64) string) string {
	if g == nil {
		return "—"
	}
	v, ok := g.median(unit)
	if !ok {
		return "—"
	}
	return f(v)
}

func medv(g *group, unit string) float64 {
	if g == nil {
		return 0
	}
	v, _ := g.median(unit)
	return v
}

// scenarioTable is the table of one scenario and mode; short leaves out the extra columns.
func (d *doc) scenarioTable(bench, mode string, short bool) string {
	t := &table{head: []string{"contender", "ns/op", "× zap→Discard", "allocs/op", "events/s delivered", "lost", "rejected/dropped"}}
	if !short {
		t.head = append(t.head, "CPU/op", "receiver CPU/entry", "run-queue wait p99")
	}
	keys := map[string]string{"mode": mode}
	for _, c := range contenders {
		g, r := d.lookup(bench, c.name, keys)
		if g == nil {
			continue
		}
		x := "—"
		if n, rn := medv(g, "ns/op"), medv(r, "ns/op"); n > 0 && rn > 0 {
			x = ratio(n / rn)
		}
		ev := med(g, "events/s", rate)
		lost := share(g.sum("lost"), g.iters())
		if c.name == ref {
			ev += " (discarded)"
			lost = "—"
		}
		if v := g.sum("violations"); v > 0 {
			lost += fmt.Sprintf(" (%s protocol violations)", count(v))
		}
		row := []string{"`" + c.name + "`", med(g, "ns/op", ns), x, med(g, "allocs/op", num), ev, lost, share(g.sum("rejected"), g.iters())}
		if !short {
			row = append(row, med(g, "cpu-ns/op", ns), med(g, "recv-ns/entry", ns), med(g, "sched-p99-ns", ns))
		}
		t.add(row...)
	}
	return t.String()
}

func (d *doc) machine() string {
	c := d.rs.config["main"]
	return fmt.Sprintf("Machine: %s, %s cores (GOMAXPROCS %s), %s/%s, %s; `-count %s`. The machine is shared and its speed drifts: compare ratios within one table, not figures across tables.",
		orDash(c["cpu"]), orDash(c["ncpu"]), orDash(c["gomaxprocs"]), orDash(c["goos"]), orDash(c["goarch"]),
		orDash(c["goversion"]), orDash(c["count"]))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// summary is docs/benchmarks.md's section.
func (d *doc) summary() string {
	var b strings.Builder
	b.WriteString(d.machine() + " Medians; lost and rejected/dropped are shares of all calls over the runs.\n\n")
	for _, mode := range []string{"single", "parallel"} {
		what := "one goroutine"
		if mode == "parallel" {
			what = "`b.RunParallel`, `SetParallelism(64)`"
		}
		fmt.Fprintf(&b, "AddingFields, %s (%s):\n\n%s\n", mode, what, d.scenarioTable("AddingFields", mode, true))
	}
	return b.String()
}

// targetsSection is bench/TARGETS.md's generated section: the machine, then each target
// with what was measured and whether it is met.
func (d *doc) targetsSection() string {
	return d.machine() + " Medians unless a row says otherwise.\n\n" + d.targets()
}

// full is bench/README.md's generated section.
func (d *doc) full() string {
	var b strings.Builder
	b.WriteString(d.machine() + " The contenders:\n\n")
	for _, c := range contenders {
		fmt.Fprintf(&b, "- `%s`: %s\n", c.name, c.what)
	}
	b.WriteString("\n")
	for _, mode := range []string{"single", "parallel"} {
		fmt.Fprintf(&b, "### %s, %s\n\n%s\n", scenarios[0], mode, d.scenarioTable(scenarios[0], mode, false))
	}
	b.WriteString(d.otherScenarios())
	b.WriteString(d.coreWrite())
	b.WriteString(d.outage())
	b.WriteString(d.throughput())
	b.WriteString(d.scaling())
	b.WriteString(d.callerLatency())
	b.WriteString(d.errLatency())
	b.WriteString(d.degrade())
	b.WriteString(d.buffers())
	b.WriteString(d.receiver())
	return b.String()
}

// otherScenarios is the scenarios after the first in one table: for each contender, scenario
// and mode, the median ns/op, its ratio to zap→Discard in the same run, and the shares of
// calls dropped and lost when there are any.
func (d *doc) otherScenarios() string {
	type col struct{ scenario, mode string }
	var cols []col
	head := []string{"contender"}
	for _, s := range scenarios[1:] {
		for _, mode := range []string{"single", "parallel"} {
			cols = append(cols, col{s, mode})
			head = append(head, s+", "+mode)
		}
	}
	t := &table{head: head}
	for _, c := range contenders {
		row, found := []string{"`" + c.name + "`"}, false
		for _, cl := range cols {
			g, r := d.lookup(cl.scenario, c.name, map[string]string{"mode": cl.mode})
			if g == nil {
				row = append(row, "—")
				continue
			}
			found = true
			cell := med(g, "ns/op", ns)
			if n, rn := medv(g, "ns/op"), medv(r, "ns/op"); n > 0 && rn > 0 {
				cell += " (" + ratio(n/rn) + ")"
			}
			if v := g.sum("rejected"); v > 0 {
				cell += ", " + share(v, g.iters()) + " dropped"
			}
			if v := g.sum("lost"); v > 0 && c.name != ref {
				cell += ", " + share(v, g.iters()) + " lost"
			}
			row = append(row, cell)
		}
		if found {
			t.add(row...)
		}
	}
	return "### The other scenarios\n\nns/op (× zap→Discard in the same run), and the share of calls rejected or dropped where there were any; every column of the AddingFields tables is in `results/raw.txt` for these too.\n\n" + t.String() + "\n"
}

func status(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// targets is the status of each target, computed from the results.
func (d *doc) targets() string {
	t := &table{head: []string{"target", "measured (medians)", "status"}}
	for _, mode := range []string{"single", "parallel"} {
		g, r := d.lookup("AddingFields", "fluentcore", map[string]string{"mode": mode})
		if g == nil || r == nil {
			continue
		}
		x := medv(g, "ns/op") / medv(r, "ns/op")
		lost, rej := g.sum("lost"), g.sum("rejected")
		t.add(fmt.Sprintf("AddingFields %s: ≤ 0.6 × zap→Discard ns/op, all delivered, 0 lost", mode),
			fmt.Sprintf("%s (%s vs %s); lost %s, dropped %s", ratio(x), med(g, "ns/op", ns), med(r, "ns/op", ns),
				share(lost, g.iters()), share(rej, g.iters())),
			status(x <= 0.6 && lost == 0 && rej == 0))
	}
	if g, _ := d.lookup("CoreWrite", "fluentcore", nil); g != nil {
		a := medv(g, "allocs/op")
		t.add("0 allocations per entry in our code (`Core.Write` called directly)", med(g, "allocs/op", num)+" allocs/op, "+med(g, "B/op", bytesIEC)+"/op", status(a == 0))
	}
	for _, mode := range []string{"single", "parallel"} {
		g, _ := d.lookup("AddingFields", "fluentcore", map[string]string{"mode": mode})
		a, _ := d.lookup("AddingFields", "fluent-logger-async", map[string]string{"mode": mode})
		if g == nil || a == nil {
			continue
		}
		x := medv(a, "ns/op") / medv(g, "ns/op")
		rej := g.sum("rejected")
		t.add(fmt.Sprintf("AddingFields %s: ≥ 5× fewer ns/op than fluent-logger-async, 0 rejected", mode),
			fmt.Sprintf("%s fewer (%s vs %s); fluentcore dropped %s, fluent-logger-async rejected %s", ratio(x),
				med(g, "ns/op", ns), med(a, "ns/op", ns), share(rej, g.iters()), share(a.sum("rejected"), a.iters())),
			status(x >= 5 && rej == 0))
	}
	if g := d.throughputOf("fluentcore"); g != nil {
		v := medv(g, "events/s")
		cores := orDash(d.rs.config["main"]["ncpu"])
		t.add("Sustained ≥ 2 M entries/s delivered on a 2-core machine (`cmd/throughput`)",
			fmt.Sprintf("%s delivered with %s goroutines on %s cores; %s of calls dropped", rate(v), g.key("goroutines"), cores,
				share(g.sum("rejected"), g.iters())), status(v >= 2e6))
	}
	if g, _ := d.lookup("Outage", "fluentcore", nil); g != nil {
		p99 := medv(g, "p99-ns")
		t.add("Outage: p99 of a log call ≤ 1 µs", "p99 "+ns(p99)+", p50 "+med(g, "p50-ns", ns), status(p99 <= 1000))
		h := medv(g, "heap-B")
		t.add("Outage: heap bounded by the configured buffer budget (12 MiB, allocated up front)", "heap growth over the stall (after a GC): "+bytesIEC(h), status(h <= 12<<20))
	}
	// Two readings of "per-entry cost": what a log call costs its caller (delivery inside
	// the timer), and wall time per entry the receiver got. The second is judged with the
	// degrade policy off: with it on, how many entries are delivered is the sampling
	// policy's choice (one message, kept 1 in SampleThereafter), not the sink's capacity.
	g1, _ := d.lookup("Scaling", "fluentcore", map[string]string{"goroutines": "1"})
	g1k, _ := d.lookup("Scaling", "fluentcore", map[string]string{"goroutines": "1024"})
	o1, _ := d.lookup("Scaling", "fluentcore-degrade-off", map[string]string{"goroutines": "1"})
	o1k, _ := d.lookup("Scaling", "fluentcore-degrade-off", map[string]string{"goroutines": "1024"})
	if g1 != nil && g1k != nil && o1 != nil && o1k != nil {
		perCall := medv(g1k, "ns/op") / medv(g1, "ns/op")
		perCallOff := medv(o1k, "ns/op") / medv(o1, "ns/op")
		t.add("Scaling: per-entry cost at 1024 goroutines ≤ 1.5 × at 1, per call",
			fmt.Sprintf("default %s (%s vs %s); degrade off %s (%s vs %s)", ratio(perCall), med(g1k, "ns/op", ns), med(g1, "ns/op", ns),
				ratio(perCallOff), med(o1k, "ns/op", ns), med(o1, "ns/op", ns)),
			status(max(perCall, perCallOff) <= 1.5))
		perEntry := perDelivered(o1k) / perDelivered(o1)
		t.add("Scaling: the same, per delivered entry (degrade off)",
			fmt.Sprintf("%s (%s vs %s; %s vs %s delivered)", ratio(perEntry), ns(perDelivered(o1k)), ns(perDelivered(o1)),
				med(o1k, "events/s", rate), med(o1, "events/s", rate)),
			status(perEntry <= 1.5))
	}
	g, _ := d.lookup("CallerLatency", "fluentcore", map[string]string{"state": "degraded", "fields": "prebuilt"})
	gc, _ := d.lookup("CallerLatency", "fluentcore", map[string]string{"state": "degraded", "fields": "per-call"})
	_, zc := d.lookup("CallerLatency", "fluentcore", map[string]string{"state": "normal", "fields": "per-call"})
	if g != nil && gc != nil {
		p99 := medv(g, "p99-ns")
		t.add("Caller latency while degraded: p99 ≤ 1 µs",
			"fields built once: p99 "+ns(p99)+", p50 "+med(g, "p50-ns", ns)+"; fields built per call (zap's slice, 1 alloc, drives the GC): p99 "+med(gc, "p99-ns", ns)+" (zap→Discard, same calls, normal: "+med(zc, "p99-ns", ns)+")",
			status(p99 <= 1000)+" (judged on the logger's own path: fields built once)")
	}
	if g, _ := d.lookup("ErrLatency", "fluentcore", nil); g != nil {
		p99 := medv(g, "p99-ns")
		t.add("Err entry latency under an info flood: p99 ≈ Transport.FlushInterval (500 ms) + a few ms",
			"p99 "+ns(p99)+", p50 "+med(g, "p50-ns", ns)+", max "+med(g, "max-ns", ns), status(p99 <= 520e6)+" (≤ 520 ms)")
	}
	d.hotPathTargets(t)
	d.degradeTargets(t)
	d.degradeRuleTargets(t)
	d.scaleOutTargets(t)
	d.tagTargets(t)
	return t.String()
}

// tagTargets adds the targets of logger tags: BenchmarkTags, BenchmarkTagFlood
// and BenchmarkTagCardinality.
func (d *doc) tagTargets(t *table) {
	one := d.rs.find("main", "Tags", map[string]string{"tags": "1"})
	eight := d.rs.find("main", "Tags", map[string]string{"tags": "8"})
	if one != nil && eight != nil {
		x, a := medv(eight, "events/s")/medv(one, "events/s"), medv(eight, "allocs/op")
		t.add("Logger tags, 8 tags flat out, degrade off: ≥ 0.9 × one tag's delivered rate, 0 allocs/op",
			fmt.Sprintf("%s (%s vs %s delivered); %s allocs/op", ratio(x), med(eight, "events/s", rate), med(one, "events/s", rate), num(a)),
			status(x >= 0.9 && a == 0))
	}
	if g := d.rs.find("main", "TagFlood", map[string]string{"policy": "adaptive"}); g != nil {
		t.add("Logger tags, one tag at 5× capacity and seven at 1 % each: every entry of the seven delivered",
			fmt.Sprintf("dropped %s of %s; %s delivered and not received", count(g.sum("rare-dropped")), count(g.sum("rare-entries")),
				count(g.sum("rare-delivered-not-received"))),
			status(g.sum("rare-dropped") == 0 && g.sum("rare-delivered-not-received") == 0))
	}
	if g := d.rs.find("main", "TagCardinality", nil); g != nil {
		t.add("Logger tags, 10,000 names past Tags.Max: memory within the budget, every entry accounted for",
			fmt.Sprintf("%s tags received; %s overflow entries, %s unaccounted; heap retained %s MiB after GC",
				med(g, "tags-received", num), count(g.sum("overflow")), count(g.sum("unaccounted")), med(g, "heap-retained-MiB", sig)),
			status(g.sum("unaccounted") == 0 && medv(g, "heap-retained-MiB") <= 12))
	}
}

// degradeRuleTargets adds the targets of the degrade rule (BenchmarkDegradeRule: the default and
// DegradeOff back to back in each round, their order alternating): what the default sheds
// is only what would not have fitted.
func (d *doc) degradeRuleTargets(t *table) {
	rule := func(keys map[string]string) *group { return d.rs.find("main", "DegradeRule", keys) }
	const pre = "Degrade rule, "
	if g := rule(map[string]string{"scenario": "burst80%"}); g != nil {
		t.add(pre+"a burst of 80 % of the info budget, flat out, at a receiver reading 20 k/s: 0 dropped",
			fmt.Sprintf("dropped %s in %s rounds (off: %s)", count(g.sum("adaptive-dropped")), count(float64(len(g.runs))), count(g.sum("off-dropped"))),
			status(g.sum("adaptive-dropped") == 0))
	}
	for _, sc := range []struct{ name, what string }{
		{"burst400%", "a burst of 4× the budget at the same receiver"},
		{"eager-burst400%", "a burst of 4× the budget at a receiver that reads eagerly and processes at 20 k/s"},
	} {
		if g := rule(map[string]string{"scenario": sc.name}); g != nil {
			x := medv(g, "delivered-ratio")
			t.add(pre+sc.what+": delivered ≥ 0.98 × degrade off",
				fmt.Sprintf("%s (median of %s rounds)", ratio(x), count(float64(len(g.runs)))), status(x >= 0.98))
		}
	}
	where := map[string]string{"alone": "alone", "neighbour": "beside a CPU-bound process"}
	for _, load := range []string{"alone", "neighbour"} {
		for _, sc := range []string{"steady50%", "steady80%"} {
			g := rule(map[string]string{"scenario": sc, "load": load})
			if g == nil {
				continue
			}
			t.add(pre+strings.Replace(strings.TrimPrefix(sc, "steady"), "%", " %", 1)+" of capacity, steady, "+where[load]+": 0 dropped",
				fmt.Sprintf("%s offered; dropped %s", med(g, "adaptive-offered/s", rate), count(g.sum("adaptive-dropped"))),
				status(g.sum("adaptive-dropped") == 0))
		}
	}
	for _, load := range []string{"alone", "neighbour"} {
		for _, gs := range []string{"8", "64"} {
			for _, sc := range []string{"bursty30%", "bursty50%", "bursty80%"} {
				g := rule(map[string]string{"scenario": sc, "goroutines": gs, "load": load})
				if g == nil {
					continue
				}
				t.add(pre+strings.Replace(strings.TrimPrefix(sc, "bursty"), "%", " %", 1)+" of capacity in bursts of 64 from "+gs+" goroutines, "+where[load]+": 0 dropped",
					fmt.Sprintf("%s offered; dropped %s in %s rounds (off: %s)", med(g, "adaptive-offered/s", rate), count(g.sum("adaptive-dropped")), count(float64(len(g.runs))), count(g.sum("off-dropped"))),
					status(g.sum("adaptive-dropped") == 0))
			}
		}
	}
	if g := rule(map[string]string{"scenario": "startup5%"}); g != nil {
		t.add(pre+"start-up, 5 % of capacity from the first call: 0 dropped",
			fmt.Sprintf("dropped %s", count(g.sum("adaptive-dropped"))), status(g.sum("adaptive-dropped") == 0))
	}
	if g := rule(map[string]string{"scenario": "flat-out", "goroutines": "8"}); g != nil {
		low, _ := g.min("delivered-ratio")
		t.add(pre+"flat out, 8 goroutines: ≥ 0.9 × degrade off in every round",
			fmt.Sprintf("lowest %s, median %s of %s rounds", ratio(low), ratio(medv(g, "delivered-ratio")), count(float64(len(g.runs)))), status(low >= 0.9))
	}
	if g := rule(map[string]string{"scenario": "flat-out-one-cpu", "goroutines": "8"}); g != nil {
		x := 1 / medv(g, "delivered-ratio")
		t.add(pre+"flat out from 8 goroutines on one CPU (GOMAXPROCS 1): degrade off delivers ≥ 0.8 × the default",
			fmt.Sprintf("%s (median of %s rounds)", ratio(x), count(float64(len(g.runs)))), status(x >= 0.8))
	}
	if g := rule(map[string]string{"scenario": "flat-out-side-by-side", "goroutines": "8"}); g != nil {
		low, _ := g.min("delivered-ratio")
		measured := fmt.Sprintf("lowest %s, median %s of %s rounds", ratio(low), ratio(medv(g, "delivered-ratio")), count(float64(len(g.runs))))
		if clow, ok := g.min("control-ratio"); ok {
			// The control, degrade off against itself in the same rounds: the noise floor.
			measured += fmt.Sprintf("; degrade off against itself: lowest %s, median %s", ratio(clow), ratio(medv(g, "control-ratio")))
		}
		t.add(pre+"flat out, 8 goroutines each, side by side with degrade off: ≥ 0.9 × degrade off in every round", measured, status(low >= 0.9))
	}
	for _, n := range []string{"1", "16", "256", "1024"} {
		g := rule(map[string]string{"scenario": "flat-out", "goroutines": n})
		if g == nil {
			continue
		}
		x, qf := medv(g, "delivered-ratio"), medv(g, "adaptive-queue-full-frac")
		gs := " goroutines"
		if n == "1" {
			gs = " goroutine"
		}
		t.add(pre+"flat out, "+n+gs+": ≥ 0.95 × degrade off, queue_full ≤ 1 %",
			fmt.Sprintf("%s; queue_full %s (medians)", ratio(x), pct(qf)), status(x >= 0.95 && qf <= 0.01))
	}
	if g := rule(map[string]string{"scenario": "skew-warn"}); g != nil {
		t.add(pre+"skew, a hot Info message, 200 rare ones at 2/s and a Warn at 2 k/s: every rare and Warn entry delivered",
			fmt.Sprintf("lost %s (off: %s)", count(g.sum("adaptive-rare-and-warn-lost")), count(g.sum("off-rare-and-warn-lost"))),
			status(g.sum("adaptive-rare-and-warn-lost") == 0))
	}
	if g := rule(map[string]string{"scenario": "weights-10x"}); g != nil {
		w, f := medv(g, "weights/logged"), medv(g, "weights/logged-first-100ms")
		t.add(pre+"WeightKey over a sudden 10× burst: weights within 2 % of what was logged, first 100 ms too",
			fmt.Sprintf("%s of logged (first 100 ms: %s); %s of the burst shed", ratio(w), ratio(f), pct(medv(g, "dropped/logged"))),
			status(w >= 0.98 && w <= 1.02 && f >= 0.98 && f <= 1.02))
	}
}

// scaleOutTargets adds the targets of several connections and pipelined acks, each
// measured against its reference in the same run.
func (d *doc) scaleOutTargets(t *table) {
	shape := func(name, conns string) *group {
		return d.rs.find("main", "ScaleOut", map[string]string{"shape": name, "connections": conns})
	}
	for _, s := range []struct{ name, what string }{
		{"four-servers", "four servers, each read at R"},
		{"workers", "one server reading each connection at R (fluentd's workers)"},
	} {
		one, four := shape(s.name, "1"), shape(s.name, "4")
		if one == nil || four == nil {
			continue
		}
		v := medv(four, "of-R")
		t.add(fmt.Sprintf("Scale-out, %s: ≥ 3.5 R delivered with Info.Connections 4 (R = 150 k entries/s)", s.what),
			fmt.Sprintf("4 connections: %s R (%s); 1 connection: %s R", sig(v), med(four, "delivered/s", rate), med(one, "of-R", sig)), status(v >= 3.5))
	}
	// The same shapes with no setting (Info.Connections 0: one connection per
	// server, each address of a name counted).
	for _, s := range []struct{ name, what string }{
		{"four-servers", "four servers, each read at R"},
		{"four-addresses", "one name with four addresses, each read at R"},
	} {
		def, one := shape(s.name, "default"), shape(s.name, "1")
		if def == nil {
			continue
		}
		v, ref := medv(def, "of-R"), ""
		if one != nil {
			ref = fmt.Sprintf("; Info.Connections 1: %s R", med(one, "of-R", sig))
		}
		t.add(fmt.Sprintf("Spread by default, %s: ≥ 3.5 R delivered with the default config (R = 150 k entries/s)", s.what),
			fmt.Sprintf("default: %s R (%s)%s", sig(v), med(def, "delivered/s", rate), ref), status(v >= 3.5))
	}
	// The degrade-off cases carry no degrade key ("" matches only its absence).
	inflight := func(degrade, acks, n string) *group {
		return d.rs.find("main", "MaxInflight", map[string]string{"degrade": degrade, "acks": acks, "inflight": n})
	}
	def := strconv.Itoa(fluentcore.DefaultMaxInflight)
	on, off := inflight("", "on", def), inflight("", "off", "")
	const acksTarget = "Acks: Info.Acks on with a 1 ms ack delay delivers ≥ 0.9 × the same receiver without acks"
	switch {
	case off == nil:
	case on == nil:
		t.add(acksTarget, fmt.Sprintf("Transport.MaxInflight %s (the default) was not measured in this run", def), "not measured")
	default:
		x := medv(on, "delivered/s") / medv(off, "delivered/s")
		row := ""
		for _, n := range []string{"1", "4", "8", "16", "32"} {
			if g := inflight("", "on", n); g != nil && n != def {
				row += fmt.Sprintf("; Transport.MaxInflight %s: %s", n, ratio(medv(g, "delivered/s")/medv(off, "delivered/s")))
			}
		}
		t.add(acksTarget+", degrade off",
			fmt.Sprintf("Transport.MaxInflight %s (the default): %s (%s vs %s)%s", def, ratio(x), med(on, "delivered/s", rate), med(off, "delivered/s", rate), row),
			status(x >= 0.9))
	}
	if on, off := inflight("adaptive", "on", ""), inflight("adaptive", "off", ""); on != nil && off != nil {
		x := medv(on, "delivered/s") / medv(off, "delivered/s")
		t.add(acksTarget+", DegradeAdaptive (the default policy)",
			fmt.Sprintf("Transport.MaxInflight %s (the default): %s (%s vs %s)", def, ratio(x), med(on, "delivered/s", rate), med(off, "delivered/s", rate)),
			status(x >= 0.9))
	}
	if one := shape("fast", "1"); one != nil {
		row := ""
		for _, n := range []string{"2", "4", "8"} {
			if g := shape("fast", n); g != nil {
				row += fmt.Sprintf("; %s: %s", n, ratio(medv(g, "delivered/s")/medv(one, "delivered/s")))
			}
		}
		t.add("Connections against a fast receiver: the default's choice",
			fmt.Sprintf("1 connection: %s; more, of what 1 delivers%s (run one after another; the alternated rounds in bench/README.md, \"Scale-out and acks\", decide). With one server the default is one connection, which keeps each goroutine's entries in order",
				med(one, "delivered/s", rate), row),
			"see `Info.Connections`")
	}
	if fc, zj := d.throughputOf("fluentcore-degrade-off"), d.throughputOf(ref); fc != nil && zj != nil {
		t.add("Client CPU per delivered entry, `cmd/throughput` with degrade off, next to zap JSON→Discard's per entry",
			fmt.Sprintf("fluentcore %s (delivery %s, logging %s); zap JSON→Discard %s (logging %s)",
				ns(medv(fc, "cpu-s/Mentries")*1e3), med(fc, "delivery-cpu-ns/entry", ns), med(fc, "logging-cpu-ns/entry", ns),
				ns(medv(zj, "cpu-s/Mentries")*1e3), med(zj, "logging-cpu-ns/entry", ns)),
			"reported")
	}
}

// degradeTargets adds the targets of BenchmarkDegrade (DegradeAdaptive, the default, against
// DegradeOff in the same run).
func (d *doc) degradeTargets(t *table) {
	for _, n := range []string{"1", "16", "256", "1024"} {
		g, _ := d.lookup("Scaling", "fluentcore", map[string]string{"goroutines": n})
		o, _ := d.lookup("Scaling", "fluentcore-degrade-off", map[string]string{"goroutines": n})
		if g == nil || o == nil {
			continue
		}
		x, qf := medv(g, "events/s")/medv(o, "events/s"), medv(g, "queue-full-frac")
		gs := " goroutines"
		if n == "1" {
			gs = " goroutine"
		}
		t.add("Degrade policy, flat out, "+n+gs+": default delivers ≥ 0.9 × degrade off, queue_full ≤ 1 % of calls",
			fmt.Sprintf("%s (%s vs %s delivered); queue_full %s of calls", ratio(x), med(g, "events/s", rate), med(o, "events/s", rate), pct(qf)),
			status(x >= 0.9 && qf <= 0.01))
	}
	deg := func(scenario string) *group {
		return d.rs.find("main", "Degrade", map[string]string{"scenario": scenario, "policy": "adaptive"})
	}
	for _, sc := range []string{"steady50", "steady80"} {
		if g := deg(sc); g != nil {
			t.add("Degrade policy, "+strings.TrimPrefix(sc, "steady")+" % of capacity, steady: 0 dropped",
				fmt.Sprintf("%s offered, %s of it dropped", med(g, "offered/s", rate), pct(g.sum("dropped-frac"))), status(g.sum("dropped-frac") == 0))
		}
	}
	if g := deg("burst"); g != nil {
		after, in := medv(g, "drops-after-burst-ms"), medv(g, "burst-delivered/capacity")
		t.add("Degrade policy, burst, 3× capacity for 2 s: drops end ≤ 1 s after it, ≥ 0.9 × capacity delivered during it",
			fmt.Sprintf("last drop %s ms after the burst; %s of capacity delivered", sig(after), ratio(in)), status(after <= 1000 && in >= 0.9))
	}
	if g := deg("skew"); g != nil {
		t.add("Degrade policy, skew, a hot message and 200 rare ones at 2/s: every rare entry delivered",
			fmt.Sprintf("rare entries lost: %s of %s logged (logged less those the receiver counted); queue_full %s of calls; %s lost on the way",
				sig(g.sum("rare-lost")), count(g.sum("rare-logged")), pct(g.sum("queue-full-frac")/float64(max(1, g.iters()))), count(g.sum("lost"))),
			status(g.sum("rare-lost") == 0 && g.sum("lost") == 0))
	}
	if g := deg("slow-receiver"); g != nil {
		x, p99 := medv(g, "delivered/receiver"), medv(g, "err-p99-ns")
		t.add("Degrade policy, a receiver taking 200 k/s: ≥ 0.9 × that delivered, err 0 lost, err p99 ≤ 53.5 ms",
			fmt.Sprintf("%s of it delivered; err lost %s, p99 %s", ratio(x), count(g.sum("err-lost")), ns(p99)),
			status(x >= 0.9 && g.sum("err-lost") == 0 && p99 <= 53.5e6))
	}
	for _, mode := range []string{"single", "parallel"} {
		g, _ := d.lookup("AddingFields", "fluentcore", map[string]string{"mode": mode})
		o, _ := d.lookup("AddingFields", "fluentcore-degrade-off", map[string]string{"mode": mode})
		if g == nil || o == nil {
			continue
		}
		x := medv(g, "ns/op") / medv(o, "ns/op")
		t.add("Degrade policy, caller cost, AddingFields "+mode+": the default's ns/op within 10 % of degrade off's and no more allocs/op (admission is the only extra work)",
			fmt.Sprintf("%s (%s vs %s); %s vs %s allocs/op", ratio(x), med(g, "ns/op", ns), med(o, "ns/op", ns), med(g, "allocs/op", num), med(o, "allocs/op", num)),
			status(x <= 1.1 && medv(g, "allocs/op") <= medv(o, "allocs/op")))
	}
}

// degrade is the table of BenchmarkDegrade's scenarios, both policies.
func (d *doc) degrade() string {
	gs := d.rs.all("main", "Degrade")
	if len(gs) == 0 {
		return ""
	}
	t := &table{head: []string{"scenario", "policy", "offered/s", "delivered/s", "dropped", "of which queue_full", "scenario's own"}}
	for _, g := range gs {
		own := ""
		switch g.key("scenario") {
		case "burst":
			own = fmt.Sprintf("%s of capacity delivered in the burst; last drop %s ms after it", med(g, "burst-delivered/capacity", ratio), med(g, "drops-after-burst-ms", sig))
		case "skew":
			own = fmt.Sprintf("rare entries lost %s of %s (logged, less those the receiver counted)", sig(g.sum("rare-lost")), count(g.sum("rare-logged")))
		case "slow-receiver":
			own = fmt.Sprintf("%s of the receiver's 200 k/s delivered; err p99 %s, err lost %s", med(g, "delivered/receiver", ratio), med(g, "err-p99-ns", ns), count(g.sum("err-lost")))
		}
		t.add(g.key("scenario"), "`"+g.key("policy")+"`", med(g, "offered/s", rate), med(g, "delivered/s", rate),
			med(g, "dropped-frac", pct), med(g, "queue-full-frac", pct), own)
	}
	return "### Degrade policies\n\n`BenchmarkDegrade` (`go test -run '^$' -bench '^BenchmarkDegrade$' -benchtime 1x .`, medians of the runs): the default policy (`adaptive`) and `DegradeOff` in the same run, into a receiver that takes 400 k entries/s (200 k/s for slow-receiver), so that the receiver, not the two cores, is the bottleneck. Step 1 (capacity) measures what it delivers flat out; steady50/80 offer that share of it for 10 s, paced; burst offers 3× for 2 s (as much as 32 goroutines manage), then half for 5 s; skew logs one message flat out from 4 goroutines with 200 rare ones at 2/s each, into a receiver (the clock receiver, limited to the same 400 k/s) that decodes every entry and counts the rare ones that arrive; slow-receiver floods info from 16 goroutines with an err entry every 5 ms, clocked by the receiver. [degrade.png](degrade.png) is the burst scenario, drawn by `cmd/degradeplot`.\n\n" + t.String() + "\n"
}

// perDelivered is wall time per delivered entry: ns/op × calls / delivered.
func perDelivered(g *group) float64 {
	n, ev := medv(g, "ns/op"), medv(g, "events/s")
	if ev == 0 {
		return n
	}
	return 1e9 / ev
}

func (d *doc) coreWrite() string {
	t := &table{head: []string{"contender", "ns/op", "allocs/op", "B/op", "events/s delivered", "rejected/dropped"}}
	for _, c := range []string{"fluentcore", ref} {
		g, _ := d.lookup("CoreWrite", c, nil)
		if g == nil {
			continue
		}
		t.add("`"+c+"`", med(g, "ns/op", ns), med(g, "allocs/op", num), med(g, "B/op", bytesIEC), med(g, "events/s", rate), share(g.sum("rejected"), g.iters()))
	}
	return "### Core.Write alone\n\n`Core.Write` called directly with a prebuilt entry and field slice, so allocs/op is our code's alone (zap's `Logger` allocates the variadic field slice, 1 alloc in every zap-based row above). Delivery is inside the timer.\n\n" + t.String() + "\n"
}

func (d *doc) outage() string {
	t := &table{head: []string{"contender", "calls made", "p50", "p99", "p99.9", "max", "rejected/dropped", "heap growth", "blocked", "lost"}}
	for _, c := range contenders {
		g, _ := d.lookup("Outage", c.name, nil)
		if g == nil {
			continue
		}
		blocked := "no"
		if medv(g, "blocked") > 0 {
			blocked = "**yes**"
		}
		lost := share(g.sum("lost"), g.sum("calls"))
		if v := g.sum("violations"); v > 0 {
			lost += fmt.Sprintf(" (%s protocol violations)", count(v))
		}
		t.add("`"+c.name+"`", med(g, "calls", count), med(g, "p50-ns", ns), med(g, "p99-ns", ns), med(g, "p99.9-ns", ns), med(g, "max-ns", ns),
			share(g.sum("rejected"), g.sum("calls")), med(g, "heap-B", bytesIEC), blocked, lost)
	}
	return "### Outage\n\nThe receiver stops reading; each contender makes up to 200,000 AddingFields calls from one goroutine, for at most the outage window (3 s). Latency of one call; entries refused or dropped (and said so); heap retained after a GC at the end of the stall minus before it; blocked = the window ended before the calls were made (the caller waited on the receiver); lost = accepted but not delivered after the receiver resumed and the client flushed.\n\n" + t.String() + "\n"
}

func (d *doc) throughput() string {
	gs := d.rs.all("throughput", "Throughput")
	if len(gs) == 0 {
		return ""
	}
	t := &table{head: []string{"contender", "goroutines", "calls/s", "events/s delivered", "rejected/dropped", "lost",
		"client CPU / delivered entry", "of which delivery", "of which logging", "client CPU / call", "receiver CPU / delivered entry", "client peak RSS"}}
	for _, g := range gs {
		callsPerSec := 0.0
		if n := medv(g, "ns/op"); n > 0 {
			callsPerSec = 1e9 / n
		}
		// CPU per entry delivered and per call, in ns, from each run's seconds per million
		// entries delivered.
		perEntry, perCall, recv := &group{}, &group{}, &group{}
		for _, r := range g.runs {
			perEntry.runs = append(perEntry.runs, result{vals: map[string]float64{"v": r.vals["cpu-s/Mentries"] * 1e3}})
			recv.runs = append(recv.runs, result{vals: map[string]float64{"v": r.vals["recv-cpu-s/Mentries"] * 1e3}})
			if r.iters > 0 {
				perCall.runs = append(perCall.runs, result{vals: map[string]float64{"v": r.vals["cpu-s/Mentries"] * 1e3 * r.vals["delivered"] / float64(r.iters)}})
			}
		}
		recvCPU, delivery := med(recv, "v", ns), med(g, "delivery-cpu-ns/entry", ns)
		if g.key("contender") == ref { // no receiver, no sink
			recvCPU, delivery = "none", "none"
		}
		t.add("`"+g.key("contender")+"`", g.key("goroutines"), rate(callsPerSec), med(g, "events/s", rate), share(g.sum("rejected"), g.iters()),
			share(g.sum("lost"), g.iters()), med(perEntry, "v", ns), delivery, med(g, "logging-cpu-ns/entry", ns),
			med(perCall, "v", ns), recvCPU, med(g, "peak-rss-B", bytesIEC))
	}
	return "### Sustained throughput\n\n`go -C bench run ./cmd/throughput -d 10s -g 64` (and `-degrade off`; `-contender zap-json-discard` for zap's JSON core writing to io.Discard, where every call is an entry delivered): logs flat out, then flushes and waits for delivery; the receiver runs in its own process. The client's CPU is from getrusage, split by its CPU profile: delivery is the sink's goroutines (senders, ack readers, clock), logging the logging goroutines' stacks (zap, Check and Write, and their GC assists); the rest is the runtime's background GC and scheduler. Every run is profiled (100 Hz), the profiler's own cost included.\n\n" + t.String() + "\n"
}

func (d *doc) scaling() string {
	t := &table{head: []string{"goroutines", "contender", "ns/op", "× at 1 goroutine", "ns per delivered entry", "events/s delivered", "rejected/dropped", "CPU/op", "run-queue wait p99"}}
	for _, gr := range []string{"1", "16", "256", "1024"} {
		for _, c := range []string{"fluentcore", "fluentcore-degrade-off", ref} {
			g, _ := d.lookup("Scaling", c, map[string]string{"goroutines": gr})
			g1, _ := d.lookup("Scaling", c, map[string]string{"goroutines": "1"})
			if g == nil || g1 == nil {
				continue
			}
			t.add(gr, "`"+c+"`", med(g, "ns/op", ns), ratio(medv(g, "ns/op")/medv(g1, "ns/op")), ns(perDelivered(g)), med(g, "events/s", rate),
				share(g.sum("rejected"), g.iters()), med(g, "cpu-ns/op", ns), med(g, "sched-p99-ns", ns))
		}
	}
	return "### Parallel scaling\n\nAddingFields from exactly 1, 16, 256 and 1024 goroutines; flush and delivery inside the timer.\n\n" + t.String() + "\n"
}

func (d *doc) callerLatency() string {
	t := &table{head: []string{"fields", "state", "contender", "p50", "p99", "p99.9", "max", "dropped/call", "timer overhead"}}
	for _, g := range d.rs.all("main", "CallerLatency") {
		t.add(g.key("fields"), g.key("state"), "`"+g.key("contender")+"`", med(g, "p50-ns", ns), med(g, "p99-ns", ns), med(g, "p99.9-ns", ns), med(g, "max-ns", ns),
			med(g, "dropped/op", sig), med(g, "timer-ns", ns))
	}
	return "### Caller latency\n\nSingle AddingFields calls timed one by one from one goroutine. degraded: small buffers (16 KiB batches, 64 KiB info budget), receiver stalled until the info stream degrades. full: the same with the degrade policy off, once entries are dropped as `queue_full`. normal: receiver reading; zap→Discard as the floor (its p99 is what zap and the GC cost alone). fields per-call: the 10 fields built in each call, as handlers do (zap's variadic slice is one allocation, and the garbage collection it drives lands in the tail); prebuilt: the same fields from a slice built once, so the tail is the logger's own path.\n\n" + t.String() + "\n"
}

func (d *doc) errLatency() string {
	t := &table{head: []string{"contender", "err entries", "p50", "p99", "p99.9", "max", "err lost", "err spilled", "info events/s delivered", "info dropped", "run-queue wait p99"}}
	for _, g := range d.rs.all("main", "ErrLatency") {
		dropped := "—"
		if v, ok := g.median("info-dropped-frac"); ok {
			dropped = sig(100*v) + "%"
		}
		t.add("`"+g.key("contender")+"`", count(g.iters()/float64(len(g.runs))), med(g, "p50-ns", ns), med(g, "p99-ns", ns), med(g, "p99.9-ns", ns), med(g, "max-ns", ns),
			count(g.sum("err-lost")), count(g.sum("err-spilled")), med(g, "info-events/s", rate), dropped, med(g, "sched-p99-ns", ns))
	}
	return "### Err latency under an info flood\n\n16 goroutines log info entries flat out; one goroutine logs an Error entry every 5 ms. Latency: the receiver's arrival time minus the entry's EventTime (the log call). Default Transport.FlushInterval (500 ms), which bounds info only: the err sender seals and sends err entries as soon as it is free. Run-queue wait p99: the runtime's `/sched/latencies` over the run, how long a runnable goroutine (a sender, the flush clock) waited for a CPU.\n\n" + t.String() + "\n"
}

func (d *doc) buffers() string {
	models := []string{"direct", "pool-entry", "alloc-entry", "pool-batch"}
	t := &table{head: []string{"goroutines"}}
	for _, m := range models {
		t.head = append(t.head, "`"+m+"`")
	}
	for _, gr := range []string{"1", "16", "256"} {
		base := d.rs.find("main", "Buffers", map[string]string{"goroutines": gr, "model": "direct"})
		if base == nil {
			continue
		}
		row := []string{gr}
		for _, m := range models {
			g := d.rs.find("main", "Buffers", map[string]string{"goroutines": gr, "model": m})
			if g == nil {
				row = append(row, "—")
				continue
			}
			cell := med(g, "ns/op", ns) + " (" + ratio(medv(g, "ns/op")/medv(base, "ns/op")) + ")"
			if medv(g, "allocs/op") > 0 {
				cell += ", " + med(g, "B/op", bytesIEC) + "/op, " + med(g, "allocs/op", num) + " allocs/op"
			}
			row = append(row, cell)
		}
		t.add(row...)
	}
	return "### Buffers: the design choice alone\n\nThe same sharded sink model (2 × GOMAXPROCS shards, 32 batches of 256 KiB, one sender writing to `io.Discard`), the same msgpack encoding of the record; only where an entry is encoded and where its memory comes from differ. direct: into the shard's batch, batches from a fixed free list (fluentcore's design). pool-entry: into a `sync.Pool` buffer, then copied. alloc-entry: into a fresh buffer, then copied. pool-batch: direct, but batches recycled through a `sync.Pool`. ns/op (× direct); no allocation unless said.\n\n" + t.String() + "\n"
}

func (d *doc) receiver() string {
	t := &table{head: []string{"receiver", "request format", "ns/entry (wall, end to end)", "receiver CPU/entry"}}
	for _, g := range d.rs.all("main", "Receiver") {
		kind := "forwardtest count-only"
		if g.key("format") == "lines" {
			kind = "line counter"
		}
		t.add(kind, g.key("format"), med(g, "ns/entry", ns), med(g, "recv-ns/entry", ns))
	}
	for _, g := range d.rs.all("forwardtest", "CountOnly") {
		t.add("forwardtest count-only (its own `BenchmarkCountOnly`)", strings.Join(g.pos, "/")+", 1000-entry PackedForward", med(g, "ns/entry", ns), "—")
	}
	return "### The receivers' own cost\n\nEvery receiver runs in its own process (the benchmark binary re-executed), fed here with prebuilt requests of the benchmark record over one loopback connection. On 2 cores it takes CPU from the client: the scenario tables give its CPU per entry next to the client's. `decode` is forwardtest's in-memory figure without any socket.\n\n" + t.String() + "\n"
}
