// Package fluentcore is a zapcore.Core that sends zap's entries to fluentd (or fluent-bit,
// Vector, the OpenTelemetry Collector: any Fluent Forward receiver).
//
// Entries are encoded straight to MessagePack into buffers the core owns, and sent in the
// background on two streams, each with connections of its own: info (Debug, Info, Warn),
// on one connection per server by default, up to 8, and err (Error and above, or whatever
// Config.Err.Level enables), on one. Under backpressure the info stream
// degrades — entries are sampled or dropped, each drop counted by reason — while err
// entries are delivered, or spilled and counted, never lost silently: with Config.Spill.Dir
// to fsynced segment files that are replayed once the receiver is back (also by the next
// process, after a crash), else to Config.Spill.Fallback.
//
// The path of one entry:
//
//	caller goroutine                          sink goroutines (a sender per connection)
//	----------------------------------------  ------------------------------------------
//	Logger.Check -> Core.Check
//	  level off?               -> skip
//	  info stream degraded?    -> count, skip
//	Core.Write
//	  level_split: info or err
//	  encode [EventTime, {record}] into a
//	  shard's open batch (shard 0 while calm,
//	  a random one under contention)
//	  batch full / Transport.FlushInterval -> sealed  -> sender: [tag, bin(entries), {"size": n}]
//	  no free batch:                           write with deadline (ack if asked);
//	    info: drop, count (queue_full)         on error: backoff, reconnect, resend
//	    err:  wait Err.MaxWait, then spill      delivered: batch back to the free list
//	                                           failing for Spill.After (or err buffers
//	                                           full): batches to the spill
//	DPanic/Panic/Fatal: flush before return
//
// What the core promises — logging never blocks on I/O, err entries are never lost
// silently, what a logging call allocates, order, bounded memory — is stated in one place,
// with its exact bounds and the fault suite's measured table: [docs/guarantees.md].
//
// Every Core counts what happens to each entry; for each stream, once the core is closed,
// entries = delivered + dropped + spilled. Core.Stats returns the numbers, and the
// Prometheus metrics expose them on prometheus.DefaultRegisterer, where promhttp.Handler()
// serves them (Config.Metrics.Registerer for another registry, Config.Metrics.Disabled for none).
//
// Package forwardtest is an in-process Forward receiver for testing code that logs through
// fluentcore.
//
// [docs/guarantees.md]: https://github.com/fluentcore/fluentcore/blob/main/docs/guarantees.md
package fluentcore
