package fluentcore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// Config.Tag, Info.Tag and Err.Tag, and the tags Tags.Template makes, are checked by one
// rule: ASCII letters, digits, '.', '_', '-', no empty segment, at most MaxTagBytes. A bad
// Tag is a Validate error, and New sends under it with the bad bytes made '_'.
func TestStreamTagsAreCheckedAsTags(t *testing.T) {
	long := strings.Repeat("a", fluentcore.MaxTagBytes)
	for _, tc := range []struct {
		cfg  fluentcore.Config
		want string // in the error; "" for none
	}{
		{fluentcore.Config{Tag: "my app!"}, `Tag "my app!" is not a tag`},
		{fluentcore.Config{Tag: ".shop"}, "empty segment"},
		{fluentcore.Config{Tag: "shop..eu"}, "empty segment"},
		{fluentcore.Config{Info: fluentcore.InfoConfig{Tag: "a b"}}, `Info.Tag "a b"`},
		{fluentcore.Config{Err: fluentcore.ErrConfig{Tag: "x."}}, "Err.Tag"},
		{fluentcore.Config{Tag: long + "a"}, "over MaxTagBytes"},
		{fluentcore.Config{Info: fluentcore.InfoConfig{Tag: long}}, ""},
		{fluentcore.Config{Tag: long[:fluentcore.MaxTagBytes-len(".err")], Info: fluentcore.InfoConfig{Tag: "i"}, Tags: fluentcore.TagsConfig{Template: "{name}.{stream}"}}, ""},
		{fluentcore.Config{Tag: long[:fluentcore.MaxTagBytes-len(".err")], Info: fluentcore.InfoConfig{Tag: "i"}}, "leave no room"},
		{fluentcore.Config{Tag: long}, `the info stream's tag`},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{tag}..{name}"}}, "empty segment"},
		{fluentcore.Config{Tags: fluentcore.TagsConfig{Template: "{name}.{stream}."}}, "empty segment"},
		{fluentcore.Config{Tag: "shop_1.eu-west"}, ""},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.cfg.Tag, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Tag %q Tags.Template %q: error %v, want one with %q", tc.cfg.Tag, tc.cfg.Tags.Template, err, tc.want)
		}
	}
	r := forwardtest.NewReceiver(t)
	core := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Tag: "my app!", Transport: fluentcore.TransportConfig{FlushInterval: 10 * time.Millisecond}})
	defer core.Close()
	zap.New(core).Info("m")
	got, err := r.WaitForEntries(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Tag != "my_app_.info" {
		t.Errorf("tag %q, want my_app_.info", got[0].Tag)
	}
}

// A logger tag name too long for its tag to fit in MaxTagBytes goes the overflow way
// (stream's tag, name in the record, counted), never out as a tag or a metric label; empty
// segments of a name are left out, and a name of dots only overflows.
func TestLoggerTagNamesAreCappedAndHaveNoEmptySegment(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil)
	logger := zap.New(core)
	// "shop." + name + ".info" is MaxTagBytes long for the longest name that fits.
	fits := strings.Repeat("f", fluentcore.MaxTagBytes-len("shop..info"))
	for _, c := range []struct{ name, msg string }{
		{fits, "fits"},
		{fits + "x", "one over"},
		{strings.Repeat("h", 70_000), "huge"},
		{".dot.", "dots around"},
		{"a..b", "dots inside"},
		{"...", "dots only"},
	} {
		logger.With(fluentcore.Tag(c.name)).Info(c.msg)
	}
	got, err := r.WaitForEntries(6, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tags := tagsOf(got)
	for msg, want := range map[string]string{
		"fits": "shop." + fits + ".info", "one over": "shop.info", "huge": "shop.info",
		"dots around": "shop.dot.info", "dots inside": "shop.a.b.info", "dots only": "shop.info",
	} {
		if tags[msg] != want {
			t.Errorf("%s: tag %.60q (%d bytes), want %.60q", msg, tags[msg], len(tags[msg]), want)
		}
	}
	for _, e := range got {
		if len(e.Tag) > fluentcore.MaxTagBytes {
			t.Errorf("a tag of %d bytes was sent", len(e.Tag))
		}
		// In the record, a name is cut to MaxTagBytes: whole, it would make the entry too large.
		if e.Record["msg"] == "huge" && e.Record[fluentcore.TagOverflowKey] != strings.Repeat("h", fluentcore.MaxTagBytes) {
			t.Errorf("the huge name's first MaxTagBytes are not in the record under %s", fluentcore.TagOverflowKey)
		}
		if e.Record["msg"] == "one over" && e.Record[fluentcore.TagOverflowKey] != fits+"x" {
			t.Errorf("the name one byte too long is not in the record under %s", fluentcore.TagOverflowKey)
		}
	}
	st := core.Stats()
	if st.Info.TagOverflow != 3 {
		t.Errorf("TagOverflow %d, want 3", st.Info.TagOverflow)
	}
	for tag := range st.Info.Tags {
		if len(tag) > fluentcore.MaxTagBytes {
			t.Errorf("Stats has a tag of %d bytes", len(tag))
		}
	}
}

// An entry whose tag name came past Tags.Max carries the name under TagOverflowKey whatever
// the encoder config (NameKey "" included), and a user's field of that key does not
// replace it.
func TestOverflowNameIsKeptInEveryEncoderConfig(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	ec := zap.NewProductionEncoderConfig()
	ec.NameKey, ec.TimeKey = "", ""
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Tags.Max, c.Tags.FromName, c.EncoderConfig = 1, true, ec
	})
	logger := zap.New(core)
	logger.Named("first").Info("first") // takes the one tag
	logger.Named("second").Info("by name")
	logger.Named("second").With(zap.String(fluentcore.TagOverflowKey, "ctx")).Info("by name, ctx field")
	logger.With(fluentcore.Tag("opt")).Info("by option", zap.String(fluentcore.TagOverflowKey, "user"))
	logger.With(fluentcore.Tag("opt"), zap.Namespace("ns")).Error("by option, namespace", zap.String("k", "v"))
	got, err := r.WaitForEntries(5, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"by name": "second", "by name, ctx field": "second", "by option": "opt", "by option, namespace": "opt"}
	for _, e := range got {
		msg, _ := e.Record["msg"].(string)
		if msg == "first" {
			if _, ok := e.Record[fluentcore.TagOverflowKey]; ok || e.Tag != "shop.first.info" {
				t.Errorf("first: tag %q record %v", e.Tag, e.Record)
			}
			continue
		}
		if got := e.Record[fluentcore.TagOverflowKey]; got != want[msg] {
			t.Errorf("%s: %s is %v, want %q (record %v)", msg, fluentcore.TagOverflowKey, got, want[msg], e.Record)
		}
	}
	if st := core.Stats(); st.Info.TagOverflow+st.Err.TagOverflow != 4 {
		t.Errorf("TagOverflow info %d err %d, want 4 in all", st.Info.TagOverflow, st.Err.TagOverflow)
	}
}
