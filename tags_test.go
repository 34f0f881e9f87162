package fluentcore_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// tagsOf returns the tag of each message the receiver got (the record's "msg").
func tagsOf(entries []forwardtest.Entry) map[string]string {
	m := map[string]string{}
	for _, e := range entries {
		m[fmt.Sprint(e.Record["msg"])] = e.Tag
	}
	return m
}

// A logger's Tag option sends its entries, info and err alike, under the template, and
// never as a record field; loggers without one keep the streams' tags.
func TestTagOptionRoutesEntriesWithoutARecordField(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil)
	logger := zap.New(core)
	audit := logger.With(fluentcore.Tag("audit"), zap.String("svc", "shop"))
	logger.Info("plain info")
	logger.Error("plain err")
	audit.Info("audit info")
	audit.Error("audit err")
	audit.With(fluentcore.Tag("access")).Info("access info")
	audit.With(fluentcore.Tag("")).Info("untagged again")
	audit.Info("per entry option ignored", fluentcore.Tag("other"))
	got, err := r.WaitForEntries(7, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"plain info": "shop.info", "plain err": "shop.err",
		"audit info": "shop.audit.info", "audit err": "shop.audit.err",
		"access info": "shop.access.info", "untagged again": "shop.info",
		"per entry option ignored": "shop.audit.info",
	}
	if tags := tagsOf(got); fmt.Sprint(tags) != fmt.Sprint(want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	for _, e := range got {
		if _, ok := e.Record[fluentcore.TagOverflowKey]; ok {
			t.Errorf("%v: the tag is a record field", e.Record)
		}
		if e.Record["msg"] != "plain info" && e.Record["msg"] != "plain err" && e.Record["svc"] != "shop" {
			t.Errorf("%v: With's other fields are lost", e.Record)
		}
	}
	if st := core.Stats(); st.Info.TagOverflow+st.Err.TagOverflow != 0 {
		t.Errorf("overflow counted: %+v", st)
	}
}

// A zap name is a tag name only with Tags.FromName; the Tag option wins over it.
func TestNamedLoggersTagOnlyWithTagFromName(t *testing.T) {
	for _, fromName := range []bool{false, true} {
		t.Run(fmt.Sprint("Tags.FromName=", fromName), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Tags.FromName = fromName })
			logger := zap.New(core)
			logger.Named("access").Info("access")
			logger.Named("billing").Named("audit").Error("nested")
			logger.Named("access").With(fluentcore.Tag("audit")).Info("option wins")
			logger.Named("odd name*").Info("sanitized")
			logger.Info("unnamed")
			got, err := r.WaitForEntries(5, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"access": "shop.info", "nested": "shop.err", "option wins": "shop.audit.info",
				"sanitized": "shop.info", "unnamed": "shop.info",
			}
			if fromName {
				want["access"], want["nested"], want["sanitized"] = "shop.access.info", "shop.billing.audit.err", "shop.odd_name_.info"
			}
			if tags := tagsOf(got); fmt.Sprint(tags) != fmt.Sprint(want) {
				t.Errorf("tags %v, want %v", tags, want)
			}
		})
	}
}

func TestTagTemplate(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Tags.Template = "k8s.{stream}.{name}-{tag}"
		c.Info.Tag = "own.info" // the stream's tag, for untagged entries
	})
	logger := zap.New(core)
	logger.Info("plain")
	logger.With(fluentcore.Tag("audit")).Warn("tagged")
	got, err := r.WaitForEntries(2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plain": "own.info", "tagged": "k8s.info.audit-shop"}
	if tags := tagsOf(got); fmt.Sprint(tags) != fmt.Sprint(want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
}

func TestTagSettingsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		cfg  fluentcore.Config
		want string // in the error; "" for none
	}{
		{fluentcore.Config{}, ""},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{name}"}}, ""},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{tag}.{stream}"}}, "has no {name}"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{tag}.{nme}.{stream}"}}, "unknown placeholder"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{tag}.{name"}}, "unknown placeholder"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "a b.{name}"}}, "is not a tag"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "}{name}"}}, "stray brace"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Max: -1}}, "Tags.Max -1"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Max: fluentcore.MaxTagsLimit + 1}}, "Tags.Max"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Max: fluentcore.MaxTagsLimit}}, ""},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg.Tags.Template, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Tags.Template %q Tags.Max %d: error %v, want one with %q", tc.cfg.Tags.Template, tc.cfg.Tags.Max, err, tc.want)
		}
	}
}

// Past Tags.Max, an entry goes under its stream's tag with the name it asked for in the
// record, and is counted: none lost, none silent.
func TestTagsPastMaxTagsAreCountedAndKeepTheirName(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Tags.Max = 3; c.Tags.FromName = true })
	logger := zap.New(core)
	const names = 10
	for i := range names {
		logger.With(fluentcore.Tag(fmt.Sprint("t", i))).Info(fmt.Sprint("opt ", i))
	}
	for i := range names {
		logger.Named(fmt.Sprint("n", i)).Error(fmt.Sprint("name ", i))
	}
	logger.With(fluentcore.Tag("t1")).Info("known again")
	got, err := r.WaitForEntries(2*names+1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tags := tagsOf(got)
	for i := range names {
		opt, name := tags[fmt.Sprint("opt ", i)], tags[fmt.Sprint("name ", i)]
		if i < 3 {
			if want := fmt.Sprintf("shop.t%d.info", i); opt != want {
				t.Errorf("opt %d: tag %q, want %q", i, opt, want)
			}
		} else if opt != "shop.info" {
			t.Errorf("opt %d past the cap: tag %q, want shop.info", i, opt)
		}
		if name != "shop.err" { // the three names came after the three options
			t.Errorf("name %d past the cap: tag %q, want shop.err", i, name)
		}
	}
	if tags["known again"] != "shop.t1.info" {
		t.Errorf("a known name past the cap: %q", tags["known again"])
	}
	for _, e := range got {
		msg := fmt.Sprint(e.Record["msg"])
		var i int
		switch {
		case strings.HasPrefix(msg, "opt "):
			fmt.Sscan(msg[4:], &i)
			if v, ok := e.Record[fluentcore.TagOverflowKey]; (i >= 3) != ok || ok && v != fmt.Sprint("t", i) {
				t.Errorf("%v: %s %v", e.Record, fluentcore.TagOverflowKey, v)
			}
		case strings.HasPrefix(msg, "name "):
			fmt.Sscan(msg[5:], &i)
			if e.Record["logger"] != fmt.Sprint("n", i) {
				t.Errorf("%v: the name is not in the record", e.Record)
			}
		}
	}
	st := core.Stats()
	if st.Info.TagOverflow != names-3 || st.Err.TagOverflow != names {
		t.Errorf("TagOverflow info %d err %d, want %d and %d", st.Info.TagOverflow, st.Err.TagOverflow, names-3, names)
	}
}

// Many goroutines logging to several tags at once: every entry arrives under its tag, each
// goroutine's entries of a logger tag in order, and the counts add up.
func TestTaggedEntriesKeepOrderPerGoroutinePerTag(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Transport.MaxBatchBytes = 4 << 10 // many batches, many seals
		c.Info.BufferBytes = 1 << 20
	})
	logger := zap.New(core)
	const goroutines, tags, per = 8, 5, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loggers := make([]*zap.Logger, tags)
			for k := range loggers {
				if k > 0 { // tag 0: the stream's own
					loggers[k] = logger.With(fluentcore.Tag(fmt.Sprint("t", k)))
				} else {
					loggers[k] = logger
				}
			}
			for i := range per {
				k := (i * 7 / 3) % tags // interleaved
				loggers[k].Info("e", zap.Int("g", g), zap.Int("i", i))
			}
		}()
	}
	wg.Wait()
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(goroutines*per, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for _, e := range got {
		g, i := e.Record["g"].(int64), e.Record["i"].(int64)
		k := (i * 7 / 3) % tags
		want := "shop.info"
		if k > 0 {
			want = fmt.Sprintf("shop.t%d.info", k)
		}
		if e.Tag != want {
			t.Fatalf("entry %d of goroutine %d under %q, want %q", i, g, e.Tag, want)
		}
		if k == 0 {
			continue // the stream's own tag: its writers move shards under contention (shards.lock)
		}
		key := fmt.Sprint(e.Tag, "/", g)
		if p, ok := last[key]; ok && p >= i {
			t.Errorf("%s: entry %d after %d", key, i, p)
		}
		last[key] = i
	}
	if st := core.Stats().Info; st.Delivered != goroutines*per || st.DroppedTotal() != 0 {
		t.Errorf("delivered %d, dropped %v; want %d, none", st.Delivered, st.Dropped, goroutines*per)
	}
}

// Each logger tag is counted on its own, under the cap: entries = delivered + dropped for
// every tag once synced, the same numbers in Stats and in the metrics.
func TestTagCountersAddUpAndAreExported(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	core := newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) {
		c.Transport.MaxBatchBytes, c.Info.BufferBytes = 4<<10, 16<<10 // a small buffer, soon full
		c.Degrade.Policy = fluentcore.DegradeOff
		c.Tags.Max = 2
	})
	logger := zap.New(core)
	audit, access := logger.With(fluentcore.Tag("audit")), logger.With(fluentcore.Tag("access"))
	r.Stall()
	const n = 2000
	for i := range n {
		audit.Info("audit", zap.Int("i", i))
		access.Info("access", zap.Int("i", i))
		logger.Info("plain", zap.Int("i", i))
	}
	audit.Error("audit err")
	logger.With(fluentcore.Tag("third")).Info("past the cap")
	r.Resume()
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if len(st.Info.Tags) != 2 || len(st.Err.Tags) != 2 {
		t.Fatalf("tags %v %v; want two on each stream", st.Info.Tags, st.Err.Tags)
	}
	delivered := int64(st.Info.Delivered + st.Err.Delivered) // written: the receiver may still be reading
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= delivered }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var tagDropped uint64
	for tag, ts := range st.Info.Tags {
		if ts.Entries != n || ts.Delivered+ts.Dropped != ts.Entries {
			t.Errorf("%s: %+v; want %d entries, delivered + dropped = entries", tag, ts, n)
		}
		tagDropped += ts.Dropped
		if got := r.TagCounts()[tag]; got != int64(ts.Delivered) {
			t.Errorf("%s: the receiver has %d, the core delivered %d", tag, got, ts.Delivered)
		}
		for name, v := range map[string]uint64{"tag_entries_total": ts.Entries, "tag_delivered_entries_total": ts.Delivered, "tag_dropped_entries_total": ts.Dropped} {
			if got := tagMetric(t, reg, "fluentcore_"+name, "info", tag); got != float64(v) {
				t.Errorf("fluentcore_%s{tag=%q} = %v, want %d", name, tag, got, v)
			}
		}
	}
	if tagDropped == 0 || tagDropped > st.Info.DroppedTotal() {
		t.Errorf("the tags dropped %d of the stream's %d: the stalled receiver should have made some drop", tagDropped, st.Info.DroppedTotal())
	}
	if ts := st.Err.Tags["shop.audit.err"]; ts != (fluentcore.TagStats{Entries: 1, Delivered: 1}) {
		t.Errorf("audit's err: %+v", ts)
	}
	if st.Info.TagOverflow != 1 {
		t.Errorf("TagOverflow %d, want 1", st.Info.TagOverflow)
	}
	if got := tagMetric(t, reg, "fluentcore_tag_overflow_total", "info", ""); got != 1 {
		t.Errorf("fluentcore_tag_overflow_total = %v", got)
	}
}

// tagMetric is the value of the counter name with stream and, if not "", tag.
func tagMetric(t *testing.T, reg *prometheus.Registry, name, stream, tag string) float64 {
	t.Helper()
	labels := map[string]string{"stream": stream}
	if tag != "" {
		labels["tag"] = tag
	}
	return testkit.Metric(t, reg, name, labels)
}

// A logger derived from one past Tags.Max with a Tag option of its own does not carry the
// first one's name in its record; one derived with other fields does.
func TestTagOverflowFieldIsNotInherited(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Tags.Max = 1 })
	logger := zap.New(core)
	logger.With(fluentcore.Tag("first")).Info("first")
	over := logger.With(fluentcore.Tag("second"), zap.String("k", "v"))
	over.With(zap.Int("n", 1)).Info("over")
	over.With(fluentcore.Tag("first")).Info("back")
	over.With(fluentcore.Tag("")).Info("none")
	got, err := r.WaitForEntries(4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"first": "shop.first.info", "over": "shop.info", "back": "shop.first.info", "none": "shop.info"}
	if tags := tagsOf(got); fmt.Sprint(tags) != fmt.Sprint(want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	for _, e := range got {
		v, ok := e.Record[fluentcore.TagOverflowKey]
		if (e.Record["msg"] == "over") != ok || ok && v != "second" {
			t.Errorf("%v: %s %v", e.Record, fluentcore.TagOverflowKey, v)
		}
		if e.Record["msg"] != "first" && e.Record["k"] != "v" {
			t.Errorf("%v: With's field lost", e.Record)
		}
	}
}
