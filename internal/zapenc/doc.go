// Package zapenc is the zap encoder beneath the root's encoder_msgp.go: a
// zapcore.ObjectEncoder and ArrayEncoder (Encoder) that appends one Forward entry,
// [EventTime, {record}], straight into its writer's buffer. It is the msgpack twin of zap's
// JSON encoder: the same keys in the same order, the same fallbacks, the same handling of
// marshaler errors (a "<key>Error" field, never a lost entry).
//
// The package knows nothing of who writes the entry. The writer gives each entry its
// budget and, when it holds something others wait for, an msgpenc.Owner, which the
// encoder tells at once when the entry passes its budget; the writer then decides what
// becomes of the entry (Cap, CutShort, or a drop). The writer sets the entry's sample
// weight too (Encoder.Weight). What lies beneath is internal/msgpenc's: the buffer and its
// budget, the containers and their nesting cap, reflected values and JSON.
//
// Encoding allocates nothing in the steady state for zap's own field types; a reflected
// value or a marshaler may allocate what its own code does.
package zapenc
