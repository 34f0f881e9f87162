// Package fluentcore is a zapcore.Core that sends zap's entries to fluentd (or fluent-bit,
// Vector, the OpenTelemetry Collector: any Fluent Forward receiver).
//
// Entries are encoded straight to MessagePack into buffers the core owns, and sent in the
// background on two streams, each with its own connection: info (Debug, Info, Warn) and err
// (Error and above, or whatever Config.ErrLevel enables). Under backpressure the info stream
// degrades — entries are sampled or dropped, each drop counted by reason — while err
// entries are delivered, or spilled and counted, never lost silently: with Config.SpillDir
// to fsynced segment files that are replayed once the receiver is back (also by the next
// process, after a crash), else to Config.ErrFallback.
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
//	  a random one under contention; no alloc)
//	  batch full / FlushInterval -> sealed  -> sender: [tag, bin(entries), {"size": n}]
//	  no free batch:                           write with deadline (ack if asked);
//	    info: drop, count (queue_full)         on error: backoff, reconnect, resend
//	    err:  wait ErrMaxWait, then spill      delivered: batch back to the free list
//	                                           failing for SpillAfter (or err buffers
//	                                           full): batches to the spill
//	DPanic/Panic/Fatal: flush before return
//
// Logging never blocks on I/O: the only waits a caller can see are an err entry finding the
// err buffers full (at most Config.ErrMaxWait; while every err connection fails, only until
// the sender has moved them to the spill) and the flush of a DPanic, Panic or Fatal entry
// (at most Config.SyncTimeout).
//
// Every Core counts what happens to each entry; for each stream, once the core is closed,
// entries = delivered + dropped + spilled. Core.Stats returns the numbers, and the
// Prometheus metrics expose them on prometheus.DefaultRegisterer, where promhttp.Handler()
// serves them (Config.Registerer for another registry, Config.NoMetrics for none).
//
// Package forwardtest is an in-process Forward receiver for testing code that logs through
// fluentcore.
package fluentcore
