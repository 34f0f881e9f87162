package main

import "fmt"

// hotPathTargets adds the targets of the logging path's own cost: the client CPU per
// delivered entry against zap→Discard's and the default's against degrade off's, in turns
// (BenchmarkHotPath); the default's against degrade off's flat out (cmd/throughput); the
// encoder alone against zap's JSON encoder (internal/zapenc's benchmarks); and a call that
// cannot be delivered against one that is (BenchmarkRefused).
func (d *doc) hotPathTargets(t *table) {
	for _, mode := range []string{"single", "parallel"} {
		g := d.rs.find("main", "HotPath", map[string]string{"mode": mode})
		if g == nil {
			continue
		}
		x, _ := g.median("cpu-ratio")
		hi, _ := g.max("cpu-ratio")
		lost, rej := g.sum("lost"), g.sum("rejected")
		n := g.sum("delivered") + rej // the default's calls, with none lost
		t.add(fmt.Sprintf("AddingFields %s, in turns with zap→Discard: client CPU per delivered entry ≤ 0.6 × zap's, 0 lost", mode),
			fmt.Sprintf("%s (%s vs %s an entry; highest %s); lost %s, dropped %s", ratio(x), med(g, "fc-cpu-ns/entry", ns),
				med(g, "zap-cpu-ns/entry", ns), ratio(hi), share(lost, n), share(rej, n)),
			status(x <= 0.6 && lost == 0))
		if y, ok := g.median("off-ratio"); ok {
			t.add(fmt.Sprintf("AddingFields %s, in turns with degrade off: the default's client CPU per delivered entry ≤ 1.05 × degrade off's", mode),
				fmt.Sprintf("%s (%s vs %s an entry); dropped %s vs %s", ratio(y), med(g, "fc-cpu-ns/entry", ns), med(g, "off-cpu-ns/entry", ns),
					share(rej, n), share(g.sum("off-rejected"), g.sum("off-delivered")+g.sum("off-rejected"))),
				status(y <= 1.05))
		}
	}
	if fc, off := d.throughputOf("fluentcore"), d.throughputOf("fluentcore-degrade-off"); fc != nil && off != nil {
		x := medv(fc, "cpu-s/Mentries") / medv(off, "cpu-s/Mentries")
		t.add("The default's client CPU per delivered entry ≤ 1.05 × degrade off's (`cmd/throughput`, flat out)",
			fmt.Sprintf("%s (%s vs %s; %s vs %s delivered)", ratio(x),
				ns(medv(fc, "cpu-s/Mentries")*1e3), ns(medv(off, "cpu-s/Mentries")*1e3), med(fc, "events/s", rate), med(off, "events/s", rate)),
			status(x <= 1.05))
	}
	enc := d.rs.find("encoder", "EncodeEntry", nil)
	zj := d.rs.find("encoder", "ZapJSONEncodeEntry", nil)
	if enc != nil && zj != nil {
		x, a := medv(enc, "ns/op")/medv(zj, "ns/op"), medv(enc, "allocs/op")
		t.add("The encoder alone on the standard entry: ≤ 0.5 × zap's JSON encoder's ns, 0 allocations (one CPU)",
			fmt.Sprintf("%s (%s vs %s); %s allocs/op", ratio(x), med(enc, "ns/op", ns), med(zj, "ns/op", ns), num(a)),
			status(x <= 0.5 && a == 0))
	}
	refused := d.rs.find("main", "Refused", map[string]string{"receiver": "refused"})
	healthy := d.rs.find("main", "Refused", map[string]string{"receiver": "healthy"})
	if refused != nil && healthy != nil {
		calls := medv(healthy, "ns/op") / medv(refused, "ns/op") // calls per second, refused against healthy
		cpu := medv(refused, "cpu-ns/op") / medv(healthy, "cpu-ns/op")
		t.add("Every connection refused, 4 goroutines, one call in 101 an Error: calls per second ≥ 0.95 × a healthy receiver's, and a call's client CPU no more",
			fmt.Sprintf("%s the calls per second (%s vs %s a call); CPU %s (%s vs %s a call); %s of the info entries dropped",
				ratio(calls), med(refused, "ns/op", ns), med(healthy, "ns/op", ns), ratio(cpu), med(refused, "cpu-ns/op", ns), med(healthy, "cpu-ns/op", ns),
				pct(medv(refused, "info-dropped/op"))),
			status(calls >= 0.95 && cpu <= 1))
	}
}

// throughputOf is cmd/throughput's runs of contender c, or nil.
func (d *doc) throughputOf(c string) *group {
	return d.rs.find("throughput", "Throughput", map[string]string{"contender": c})
}
