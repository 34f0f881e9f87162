// Package stream is the sink's two streams, beneath the root's async_sink.go. A Stream
// owns a fixed set of batch buffers (internal/ring), allocated once by New, that go round:
// free, a shard's open batch (writers encode entries into it under the shard's lock, with
// internal/zapenc), sealed and queued, written by a sender on its connection
// (internal/forward), free again. Nothing is pooled or allocated per entry, so memory is
// bounded by the budget whatever the receiver does.
//
// What differs between the two streams is a Policy, which the stream asks and which never
// reaches back into it: the info stream's (the root's degrade.go) admits and thins under
// backpressure, and what the stream cannot carry is dropped and counted; the err stream's
// (ErrPolicy) keeps every entry whole, and what cannot be carried waits, is cut down to
// size, or is spilled (internal/spill), never dropped silently.
//
// Its files, one concern each: stream.go, the Stream, its Stats and the degrade policy's
// Observe; write.go, the write path; shards.go, the shards; floors.go, the policy's write
// side (Admission), the logger tags' floors and the reserve; batches.go, the stream's side
// of its ring; flush.go, when partly filled batches are sealed; sender.go, the senders;
// spill.go, what the stream cannot carry; err_policy.go, the err stream's policy;
// counts.go, what became of each entry; settings.go, stats.go, id.go, what the root gives
// and reads.
package stream
