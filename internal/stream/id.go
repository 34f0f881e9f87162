package stream

// ID names one of the two streams an entry can travel on.
type ID uint8

// The streams.
const (
	Info ID = iota // Debug, Info, Warn by default; may degrade under backpressure
	Err            // Error and above by default; never dropped silently
	Count
)

// String returns the value used for the "stream" metric label.
func (id ID) String() string {
	if id == Err {
		return "err"
	}
	return "info"
}
