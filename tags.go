package fluentcore

// Logger tags: which Forward tag an entry goes under besides its stream. A logger can carry
// a tag name, by a Tag option in With or (Config.TagFromName) by its zap name; the name is
// resolved to a small index once, here, and only the index travels with an entry. Names
// past Config.MaxTags are counted and go under the stream's own tag (see tagTable.lookup).

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// Tag returns a field that sets the Forward tag name of a logger's entries, the zap way:
// logger.With(fluentcore.Tag("audit")) sends the entries of that logger (info and err alike,
// each still on its stream, with its stream's policy) under Config.TagTemplate with {name}
// "audit" — "app.audit.info" and "app.audit.err" by default. The name wins over the zap name
// (Config.TagFromName); a later Tag replaces an earlier one, and Tag("") takes it away: the
// logger's entries go under their stream's tag again (or its zap name's). Bytes other than
// ASCII letters, digits, '.', '_' and '-' become '_' in the tag. The name is resolved once,
// in With; a core takes at most Config.MaxTags distinct names, and a logger with a name past
// that sends under its stream's tag with the name in the record (TagOverflowKey), counted
// in Stats (TagOverflow). The field is never written as a record field, by this core or by
// any other (its type is zapcore.SkipType); in an entry's own fields (logger.Info("…",
// fluentcore.Tag("x"))) it is ignored: only With sets a tag. Safe for concurrent use.
func Tag(name string) zapcore.Field {
	return zapcore.Field{Key: TagOverflowKey, Type: zapcore.SkipType, String: name, Interface: tagOption{}}
}

// tagOption marks a Tag field among With's fields.
type tagOption struct{}

// TagOverflowKey is the record key that carries the tag name a logger asked for (by the Tag
// option) when the core already has Config.MaxTags names: such entries go under their
// stream's tag, with "fluentcore_tag": "<name>" in the record, and are counted in
// StreamStats.TagOverflow. A zap name past the limit (Config.TagFromName) is in the record
// already, under EncoderConfig.NameKey ("logger" by default), and counted the same way.
const TagOverflowKey = "fluentcore_tag"

// DefaultTagTemplate is Config.TagTemplate's default.
const DefaultTagTemplate = "{tag}.{name}.{stream}"

// DefaultMaxTags is Config.MaxTags's default, and MaxTagsLimit its largest value.
const (
	DefaultMaxTags = 64
	MaxTagsLimit   = 1024
)

// tagRef is what travels with an entry: idx, the entry's tag (0: its stream's own tag),
// and over, whether its logger asked for a tag name past MaxTags (counted).
type tagRef struct {
	idx  uint16
	over bool
}

// tagTemplate is Config.TagTemplate, parsed: literal text between the placeholders.
type tagTemplate struct {
	parts []tagPart
}

type tagPart struct {
	lit string // literal text, or
	ph  byte   // a placeholder: 't' {tag}, 'n' {name}, 's' {stream}; 0 for a literal
}

// parseTagTemplate parses a tag template: text with the placeholders {tag}, {name} and
// {stream}; {name} is required, and nothing else may be in braces.
func parseTagTemplate(s string) (tagTemplate, error) {
	var t tagTemplate
	hasName := false
	for rest := s; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, tagPart{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tagPart{lit: rest[:i]})
		}
		rest = rest[i:]
		var ph byte
		switch {
		case strings.HasPrefix(rest, "{tag}"):
			ph = 't'
		case strings.HasPrefix(rest, "{name}"):
			ph, hasName = 'n', true
		case strings.HasPrefix(rest, "{stream}"):
			ph = 's'
		default:
			return tagTemplate{}, fmt.Errorf("TagTemplate %q: unknown placeholder or stray brace at %q (the placeholders are {tag}, {name} and {stream})", s, rest)
		}
		t.parts = append(t.parts, tagPart{ph: ph})
		rest = rest[strings.IndexByte(rest, '}')+1:]
	}
	if !hasName {
		return tagTemplate{}, fmt.Errorf("TagTemplate %q: has no {name}: every logger tag would be the same", s)
	}
	for _, p := range t.parts {
		if p.ph == 0 && strings.ContainsFunc(p.lit, func(r rune) bool { return !tagByteOK(r) }) {
			return tagTemplate{}, fmt.Errorf("TagTemplate %q: %q is not a tag (ASCII letters, digits, '.', '_', '-')", s, p.lit)
		}
	}
	return t, nil
}

// expand returns the tag for base (Config.Tag), name and stream.
func (t tagTemplate) expand(base, name string, stream streamID) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.ph {
		case 't':
			b.WriteString(base)
		case 'n':
			b.WriteString(sanitizeTagName(name))
		case 's':
			b.WriteString(stream.String())
		default:
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

func tagByteOK(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// sanitizeTagName maps every byte of name that a tag should not hold to '_'.
func sanitizeTagName(name string) string {
	if !strings.ContainsFunc(name, func(r rune) bool { return !tagByteOK(r) }) {
		return name
	}
	b := []byte(name)
	for i, c := range b {
		if !tagByteOK(rune(c)) {
			b[i] = '_'
		}
	}
	return string(b)
}

// tagTable resolves tag names to indexes: at most max of them, each with its tag per
// stream. Lookups are lock-free (an immutable map, replaced whole under mu as a name is
// added); a name past max takes no lock once the table is full. Safe for concurrent use.
type tagTable struct {
	base     string      // Config.Tag
	template tagTemplate // Config.TagTemplate, parsed
	max      int         // Config.MaxTags
	names    atomic.Pointer[map[string]tagRef]
	full     atomic.Bool // max names are in names: a new one is past the cap
	inUse    atomic.Bool // a name is in names: the streams' shards are shared with the tags
	mu       sync.Mutex
	n        int // names so far; tags[1:n+1] are set
	// tags holds each index's tag by stream: index 0 is the streams' own tags. Allocated
	// whole up front, each entry written once before its index is published in names, so
	// that readers (the senders, by a batch's index) need no lock.
	tags [][numStreams]string
	// names, by index, for Stats and metrics.
	nameOf []string
	// counts are each index's counters, by stream (index 0's stay zero: the stream's own
	// tag is the stream's totals less the others).
	counts []tagCounts
}

// tagCounts are one logger tag's counters: 64 bytes, a cache line, as a tag's writers
// share its shard anyway.
type tagCounts struct {
	entries, delivered, dropped, spilled [numStreams]atomic.Uint64
}

func newTagTable(base string, streamTags [numStreams]string, template tagTemplate, max int) *tagTable {
	t := &tagTable{base: base, template: template, max: max, tags: make([][numStreams]string, max+1),
		nameOf: make([]string, max+1), counts: make([]tagCounts, max+1)}
	t.tags[0] = streamTags
	m := map[string]tagRef{}
	t.names.Store(&m)
	return t
}

// lookup returns the index of name ("" is the streams' own tag), adding it if the table has
// room; a name past the cap gets index 0 and over.
func (t *tagTable) lookup(name string) tagRef {
	if name == "" {
		return tagRef{}
	}
	if r, ok := (*t.names.Load())[name]; ok {
		return r
	}
	if t.full.Load() {
		return tagRef{over: true}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.names.Load()
	if r, ok := old[name]; ok {
		return r
	}
	if t.n >= t.max {
		t.full.Store(true)
		return tagRef{over: true}
	}
	t.n++
	r := tagRef{idx: uint16(t.n)}
	for id := range numStreams {
		t.tags[r.idx][id] = t.template.expand(t.base, name, id)
	}
	t.nameOf[r.idx] = name
	m := make(map[string]tagRef, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = r
	t.names.Store(&m)
	t.inUse.Store(true)
	return r
}

// tagOf returns the tag of index idx on stream id. idx comes from lookup (directly, or
// through a batch written after it), which published it.
func (t *tagTable) tagOf(idx uint16, id streamID) string { return t.tags[idx][id] }

// count is how many names the table holds; indexes 1 to count are theirs.
func (t *tagTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// stats returns the counters of every logger tag on stream id, by tag; nil if there is
// none.
func (t *tagTable) stats(id streamID) map[string]TagStats {
	n := t.count()
	if n == 0 {
		return nil
	}
	m := make(map[string]TagStats, n)
	for i := 1; i <= n; i++ {
		c := &t.counts[i]
		st := m[t.tags[i][id]] // two names can make one tag
		st.Entries += c.entries[id].Load()
		st.Delivered += c.delivered[id].Load()
		st.Dropped += c.dropped[id].Load()
		st.Spilled += c.spilled[id].Load()
		m[t.tags[i][id]] = st
	}
	return m
}

// resolveTags checks the tag settings of cfg: the template, parsed, and MaxTags (the
// defaults in place of what is wrong, with the errors).
func resolveTags(cfg *Config) (tagTemplate, int, []error) {
	var errs []error
	tmpl := cfg.TagTemplate
	if tmpl == "" {
		tmpl = DefaultTagTemplate
	}
	t, err := parseTagTemplate(tmpl)
	if err != nil {
		errs = append(errs, fmt.Errorf("fluentcore: %w", err))
		t, _ = parseTagTemplate(DefaultTagTemplate)
	}
	max := cfg.MaxTags
	switch {
	case max < 0 || max > MaxTagsLimit:
		errs = append(errs, fmt.Errorf("fluentcore: MaxTags %d: want 0 (the default, %d) to %d", max, DefaultMaxTags, MaxTagsLimit))
		max = DefaultMaxTags
	case max == 0:
		max = DefaultMaxTags
	}
	return t, max, errs
}
