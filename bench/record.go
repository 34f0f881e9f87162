// Package bench measures fluentcore against zap's own cores and the Go fluentd clients, doing
// the same work in the same run. The benchmarks live in this package's _test.go files, one
// file per contender; this file holds what every contender logs, so that the work is the
// same everywhere. See README.md for the commands and the results.
package bench

import (
	"go.uber.org/zap"
)

// Tag is the Forward tag every contender sends its entries with.
const Tag = "app.access"

// Message is the message of every benchmark entry.
const Message = "request handled"

// TraceID is the value of the record's trace_id field: 32 hex characters, like a W3C trace id.
const TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// LogFields logs the benchmark entry with its 10 fields through a desugared zap logger at
// Info. The fields are built per call, as in application code (the slice is the one
// allocation zap's variadic call makes anyway). It is safe for
// concurrent use if l is; what the logger does with errors is the logger's business.
func LogFields(l *zap.Logger) {
	l.Info(Message, ContextFields()...)
}

// LogSugar logs the benchmark entry through a sugared logger with Infow. Safe for concurrent
// use if s is.
func LogSugar(s *zap.SugaredLogger) {
	s.Infow(Message,
		"method", "GET",
		"path", "/api/v1/users/12345/orders",
		"status", 200,
		"latency_ms", 12.345,
		"bytes", int64(5120),
		"user_id", "u-8f3a2b9c",
		"trace_id", TraceID,
		"ok", true,
		"retries", 0,
		"region", "ap-northeast-1",
	)
}

// ContextFields returns a new slice of the 10 fields, for zap's With (the AccumulatedContext
// scenario) and for direct Core.Write calls. Safe for concurrent use.
func ContextFields() []zap.Field {
	return []zap.Field{
		zap.String("method", "GET"),
		zap.String("path", "/api/v1/users/12345/orders"),
		zap.Int("status", 200),
		zap.Float64("latency_ms", 12.345),
		zap.Int64("bytes", 5120),
		zap.String("user_id", "u-8f3a2b9c"),
		zap.String("trace_id", TraceID),
		zap.Bool("ok", true),
		zap.Int("retries", 0),
		zap.String("region", "ap-northeast-1"),
	}
}

// RecordMap returns the record a map-based fluentd client posts: the level and message keys
// zap's production encoder writes, and the 10 fields. It allocates a new map per call, as
// application code building the map at the call site does. Safe for concurrent use.
func RecordMap() map[string]any {
	return map[string]any{
		"level":      "info",
		"msg":        Message,
		"method":     "GET",
		"path":       "/api/v1/users/12345/orders",
		"status":     200,
		"latency_ms": 12.345,
		"bytes":      int64(5120),
		"user_id":    "u-8f3a2b9c",
		"trace_id":   TraceID,
		"ok":         true,
		"retries":    0,
		"region":     "ap-northeast-1",
	}
}

// BareMap returns a new record of an entry without fields: level and message only. Safe for
// concurrent use.
func BareMap() map[string]any {
	return map[string]any{"level": "info", "msg": Message}
}
