package fluentcore

// Logger tags: which Forward tag an entry goes under besides its stream. A logger can carry
// a tag name, by a Tag option in With or (Config.Tags.FromName) by its zap name; the name is
// resolved to a small index once, here, and only the index travels with an entry. Names
// past Config.Tags.Max are counted and go under the stream's own tag (see newTagTable).

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluentcore/fluentcore/internal/tagtable"
	"go.uber.org/zap/zapcore"
)

// Tag returns a field that sets the Forward tag name of a logger's entries, the zap way:
// logger.With(fluentcore.Tag("audit")) sends the entries of that logger (info and err alike,
// each still on its stream, with its stream's policy) under Config.Tags.Template with {name}
// "audit" — "app.audit.info" and "app.audit.err" by default. The name wins over the zap name
// (Config.Tags.FromName); a later Tag replaces an earlier one, and Tag("") takes it away: the
// logger's entries go under their stream's tag again (or its zap name's). Bytes other than
// ASCII letters, digits, '.', '_' and '-' become '_' in the tag, and empty segments are left
// out (".dot." is "dot"). The name is resolved once, in With; a core takes at most
// Config.Tags.Max distinct names, and a logger with a name past that — or a name whose tag
// would pass MaxTagBytes, or of dots only — sends under its stream's tag with the name in
// the record (TagOverflowKey), counted in Stats (TagOverflow). The field is never written
// as a record field, by this core or by any other (its type is zapcore.SkipType); in an
// entry's own fields (logger.Info("…", fluentcore.Tag("x"))) it is ignored: only With sets
// a tag. Safe for concurrent use.
func Tag(name string) zapcore.Field {
	return zapcore.Field{Key: TagOverflowKey, Type: zapcore.SkipType, String: name, Interface: tagOption{}}
}

// tagOption marks a Tag field among With's fields.
type tagOption struct{}

// TagOverflowKey is the record key that carries the tag name a logger asked for (by the Tag
// option, or its zap name with Config.Tags.FromName) when the core already has Config.Tags.Max
// names, or when the name is too long for a tag (MaxTagBytes): such entries go under their
// stream's tag, with "fluentcore_tag": "<name>" in the record whatever the EncoderConfig
// (its first MaxTagBytes bytes), and are counted in StreamStats.TagOverflow. The key is
// the record's last, after every field: a user's field of the same key comes before it,
// and a receiver that keeps the last of a repeated key (fluentd) keeps the name.
const TagOverflowKey = "fluentcore_tag"

// MaxTagBytes is the longest Forward tag a core sends, and so the longest tag label of
// its metrics: Config.Tag and the streams' tags (Info.Tag and Err.Tag, or Tag+".info" and
// Tag+".err"; a longer one is a Validate error, and New cuts it to this length), and every
// tag Tags.Template makes for a logger tag name. A logger
// tag name too long for its tag to fit goes the way of a name past Tags.Max: under its
// stream's tag, with the name in the record (TagOverflowKey), counted.
const MaxTagBytes = 256

// DefaultTagTemplate is Config.Tags.Template's default.
const DefaultTagTemplate = "{tag}.{name}.{stream}"

// DefaultMaxTags is Config.Tags.Max's default, and MaxTagsLimit its largest value.
const (
	DefaultMaxTags = 64
	MaxTagsLimit   = 1024
)

// tagTemplate is Config.Tags.Template, parsed: literal text between the placeholders.
type tagTemplate struct {
	parts []tagPart
}

type tagPart struct {
	lit string // literal text, or
	ph  byte   // a placeholder: 't' {tag}, 'n' {name}, 's' {stream}; 0 for a literal
}

// parseTagTemplate parses a tag template: text with the placeholders {tag}, {name} and
// {stream}; {name} is required, and nothing else may be in braces. The tags it makes are
// checked by resolveTags (checkTag), as every tag is.
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
			return tagTemplate{}, fmt.Errorf("Tags.Template %q: unknown placeholder or stray brace at %q (the placeholders are {tag}, {name} and {stream})", s, rest)
		}
		t.parts = append(t.parts, tagPart{ph: ph})
		rest = rest[strings.IndexByte(rest, '}')+1:]
	}
	if !hasName {
		return tagTemplate{}, fmt.Errorf("Tags.Template %q: has no {name}: every logger tag would be the same", s)
	}
	return t, nil
}

// checkTag returns what keeps tag from being a Forward tag, nil if nothing: it is empty,
// longer than MaxTagBytes, holds a byte other than ASCII letters, digits, '.', '_' and '-',
// or has an empty segment (a leading, trailing or doubled '.'). Config.Tag, Info.Tag,
// Err.Tag and the tags Tags.Template makes are all checked by it.
func checkTag(tag string) error {
	switch {
	case tag == "":
		return errors.New("is empty")
	case len(tag) > MaxTagBytes:
		return fmt.Errorf("is %d bytes long, over MaxTagBytes (%d)", len(tag), MaxTagBytes)
	case strings.ContainsFunc(tag, func(r rune) bool { return !tagByteOK(r) }):
		return errors.New("is not a tag: it may hold only ASCII letters, digits, '.', '_' and '-'")
	case tag[0] == '.' || tag[len(tag)-1] == '.' || strings.Contains(tag, ".."):
		return errors.New("has an empty segment (a leading, trailing or doubled '.')")
	}
	return nil
}

// tagName is name as it is written in a tag: every byte a tag should not hold made '_',
// and its empty segments left out (".dot." is "dot", "a..b" is "a.b").
func tagName(name string) string {
	name = sanitizeTagName(name)
	if !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".") && !strings.Contains(name, "..") {
		return name
	}
	segs := strings.Split(name, ".")
	return strings.Join(slices.DeleteFunc(segs, func(s string) bool { return s == "" }), ".")
}

// resolveStreamTags checks Config.Tag (DefaultTag when empty), Info.Tag and Err.Tag
// (when set) with checkTag and returns an error for each that fails, which it replaces by
// its tagName cut to MaxTagBytes (DefaultTag for a Tag left empty by that).
func resolveStreamTags(cfg *Config) []error {
	var errs []error
	if cfg.Tag == "" {
		cfg.Tag = DefaultTag
	}
	for _, f := range []struct {
		field string
		tag   *string
	}{{"Tag", &cfg.Tag}, {"Info.Tag", &cfg.Info.Tag}, {"Err.Tag", &cfg.Err.Tag}} {
		if *f.tag == "" {
			continue
		}
		if err := checkTag(*f.tag); err != nil {
			errs = append(errs, fmt.Errorf("fluentcore: %s %q %w", f.field, *f.tag, err))
			fixed := tagName(*f.tag)
			fixed = strings.TrimRight(fixed[:min(len(fixed), MaxTagBytes)], ".")
			if fixed == "" && f.field == "Tag" {
				fixed = DefaultTag
			}
			*f.tag = fixed
		}
	}
	return errs
}

// capStreamTags checks the streams' tags, as streamTags made them, against MaxTagBytes
// (Tag+".info" may pass it where Tag does not): an error for each that is longer, which
// it cuts to MaxTagBytes.
func capStreamTags(tags *[numStreams]string) []error {
	var errs []error
	for id := range numStreams {
		if tag := tags[id]; len(tag) > MaxTagBytes {
			errs = append(errs, fmt.Errorf("fluentcore: the %s stream's tag %q is %d bytes long, over MaxTagBytes (%d)", id, tag, len(tag), MaxTagBytes))
			tags[id] = strings.TrimRight(tag[:MaxTagBytes], ".")
		}
	}
	return errs
}

// expand returns the tag for base (Config.Tag), name and stream.
func (t tagTemplate) expand(base, name string, stream streamID) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.ph {
		case 't':
			b.WriteString(base)
		case 'n':
			b.WriteString(tagName(name))
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

// newTagTable returns the core's table of logger tags: at most max names, each with its
// tag per stream by template (base its {tag}), index 0 the streams' own tags; a name whose
// tags would pass MaxTagBytes is past the cap.
func newTagTable(base string, streamTags [numStreams]string, template tagTemplate, max int) *tagtable.Table {
	names := 0
	for _, p := range template.parts {
		if p.ph == 'n' {
			names++
		}
	}
	names = cmp.Or(names, 1) // parseTagTemplate makes sure of one
	nameRoom := MaxTagBytes
	for id := range numStreams {
		nameRoom = min(nameRoom, (MaxTagBytes-len(template.expand(base, "", id)))/names)
	}
	expand := func(name string, stream int) string { return template.expand(base, name, streamID(stream)) }
	return tagtable.New(streamTags, max, nameRoom, expand)
}

// resolveTags checks the tag settings of cfg: the template, parsed, and Tags.Max (the
// defaults in place of what is wrong, with the errors). cfg.Tag is resolveStreamTags'.
func resolveTags(cfg *Config) (tagTemplate, int, []error) {
	var errs []error
	tmpl := cfg.Tags.Template
	if tmpl == "" {
		tmpl = DefaultTagTemplate
	}
	t, err := parseTagTemplate(tmpl)
	if err == nil {
		// The tags it makes, for a one-byte name, are tags (its text's bytes, no empty
		// segment, within MaxTagBytes with room for a name).
		for id := range numStreams {
			tag := t.expand(cfg.Tag, "x", id)
			if terr := checkTag(tag); terr != nil {
				err = fmt.Errorf("Tags.Template %q makes tags such as %q, which %w", tmpl, tag, terr)
				if len(tag) > MaxTagBytes {
					err = fmt.Errorf("Tags.Template %q with Tag %q would leave no room in MaxTagBytes (%d) for a logger tag name: every logger tag would go the overflow way", tmpl, cfg.Tag, MaxTagBytes)
				}
				break
			}
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("fluentcore: %w", err))
		t, _ = parseTagTemplate(DefaultTagTemplate)
	}
	max := cfg.Tags.Max
	switch {
	case max < 0 || max > MaxTagsLimit:
		errs = append(errs, fmt.Errorf("fluentcore: Tags.Max %d: want 0 (the default, %d) to %d", max, DefaultMaxTags, MaxTagsLimit))
		max = DefaultMaxTags
	case max == 0:
		max = DefaultMaxTags
	}
	return t, max, errs
}
