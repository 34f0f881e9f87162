// Package msgpenc writes the msgpack of one Forward entry's record as the root's zap
// encoder hands it over, key by key and value by value, within a budget. It knows zap's
// marshaler interfaces and nothing of the streams, shards or shedding that use it.
//
//   - Appender: the buffer an entry is appended to and its budget (the entry size cap):
//     where appending stops, which str and bin values are stored cut, and the cut of a whole
//     entry to a limit (CapEntry).
//   - Writer: an Appender's open maps and arrays, whose headers are patched when they close,
//     and the nesting cap (MaxDepth) they all count towards.
//   - Reflector: a Writer that writes reflected values too (zap.Reflect, zap.Any), by
//     encoding/json's rules; JSON text converted to msgpack.
//
// Every value is counted in the innermost open container, so whatever a caller's marshaler
// does (fails midway, opens namespaces, uses an ObjectEncoder as an ArrayEncoder) the
// output stays exactly one valid msgpack value.
package msgpenc
