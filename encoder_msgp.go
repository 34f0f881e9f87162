package fluentcore

import (
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The zap encoder. Each entry becomes one Forward entry, [EventTime, {record}]: the
// record's keys and values are those zap's JSON encoder would write for the same
// EncoderConfig, in the same order, with the same fallbacks, a marshaler's error a
// "<key>Error" field. The encoder itself is internal/zapenc's; this file is what the root
// decides of it: the EncoderConfig a user who sets none gets, and where a tag name past
// the tag table's cap is written.

// resolveEncoder returns how entries are encoded: with zc, or when zc is all unset with
// zap's production settings without a time key (the record's time is the entry's); a tag
// past MaxTagBytes is written under TagOverflowKey.
func resolveEncoder(zc zapcore.EncoderConfig) *zapenc.Config {
	if isZeroEncoderConfig(zc) {
		zc = zap.NewProductionEncoderConfig()
		zc.TimeKey = ""
	}
	enc := zapenc.NewConfig(zc)
	enc.OverflowKey, enc.OverflowMax = msgpenc.AppendStr(nil, TagOverflowKey), MaxTagBytes
	return enc
}

// isZeroEncoderConfig reports whether c sets nothing an entry's encoding reads.
func isZeroEncoderConfig(c zapcore.EncoderConfig) bool {
	return c.MessageKey == "" && c.LevelKey == "" && c.TimeKey == "" && c.NameKey == "" &&
		c.CallerKey == "" && c.FunctionKey == "" && c.StacktraceKey == "" &&
		c.EncodeLevel == nil && c.EncodeTime == nil && c.EncodeDuration == nil &&
		c.EncodeCaller == nil && c.EncodeName == nil
}
