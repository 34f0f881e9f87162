package fluentcore

import (
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/stream"
	"go.uber.org/zap/zapcore"
)

// streamID names one of the two streams an entry can travel on (internal/stream's ID).
type streamID = stream.ID

const (
	infoStream = stream.Info // Debug, Info, Warn by default; may degrade under backpressure
	errStream  = stream.Err  // Error and above by default; never dropped silently
	numStreams = stream.Count
)

// levelSplit decides which stream an entry goes to. It is immutable and safe for concurrent
// use.
type levelSplit struct {
	err zapcore.LevelEnabler // entries it enables go to the err stream
}

func newLevelSplit(errLevel zapcore.LevelEnabler) levelSplit {
	if errLevel == nil {
		errLevel = zapcore.ErrorLevel
	}
	return levelSplit{err: errLevel}
}

// streamFor returns the stream for an entry at level l.
func (s levelSplit) streamFor(l zapcore.Level) streamID {
	if s.err.Enabled(l) {
		return errStream
	}
	return infoStream
}

// streamTags returns the Forward tag of each stream: Tag+".info" and Tag+".err" unless the
// stream's own Tag overrides it.
func streamTags(cfg *Config) [numStreams]string {
	tags := [numStreams]string{cfg.Tag + ".info", cfg.Tag + ".err"}
	if cfg.Info.Tag != "" {
		tags[infoStream] = cfg.Info.Tag
	}
	if cfg.Err.Tag != "" {
		tags[errStream] = cfg.Err.Tag
	}
	return tags
}

// streamDropReasons are the reasons an entry of each stream can be dropped for, the series
// the metrics export: the info stream drops what it cannot carry; the err stream drops only
// what the spill refuses and what no field could take while encoding (the rest of what it
// cannot carry is spilled, not dropped).
var streamDropReasons = [numStreams][]outcome.Reason{
	infoStream: {outcome.Degraded, outcome.Sampled, outcome.QueueFull, outcome.TooLarge, outcome.Closed, outcome.EncodeError, outcome.Shutdown},
	errStream:  {outcome.EncodeError, outcome.SpillFailed, outcome.SpillFull},
}
