package fluentcore

import "time"

// EventKind says what an Event reports.
type EventKind int

const (
	// EventDegraded reports that the stream entered the degraded state.
	EventDegraded EventKind = iota
	// EventRecovered reports that the stream left the degraded state.
	EventRecovered
	// EventSpillDisabled reports that Spill.Dir cannot be used (not creatable, or locked by another
	// core); err entries go to Spill.Fallback. Reported once, when the err sender starts.
	EventSpillDisabled
	// EventSpillFull reports that the spill reached Spill.MaxBytes; err entries it refuses are counted
	// (spill_full) and written to Spill.Fallback. Reported once per episode.
	EventSpillFull
	// EventSpillCorrupt reports that a damaged segment tail (a frame cut by a crash, garbage) was
	// skipped during replay; the frames before it were replayed.
	EventSpillCorrupt
	// EventSpillFailed reports that writing or deleting a segment failed.
	EventSpillFailed
	// EventDisconnected reports that every connection of the stream fails: nothing it sends
	// is delivered until EventConnected. Err is the last send error.
	EventDisconnected
	// EventConnected reports that a stream that was disconnected delivers again.
	EventConnected
)

var eventKindNames = [...]string{"degraded", "recovered", "spill_disabled", "spill_full", "spill_corrupt", "spill_failed", "disconnected", "connected"}

// String returns "degraded", "recovered", "spill_disabled", "spill_full", "spill_corrupt",
// "spill_failed", "disconnected" or "connected", and "unknown" for a value that is none of
// these.
func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventKindNames) {
		return "unknown"
	}
	return eventKindNames[k]
}

// Event is a state change of a stream, passed to Config.OnEvent.
type Event struct {
	Kind   EventKind
	Stream string // "info" or "err": degrade events are the info stream's, spill events the err stream's
	Time   time.Time
	Err    error // for spill events: what happened, naming the directory or segment; for EventDisconnected, the last send error
}
