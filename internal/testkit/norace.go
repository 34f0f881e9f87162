//go:build !race

package testkit

// Race reports whether the test binary was built with the race detector, which makes
// memory-heavy calls (such as allocating a core's buffers) several times slower: a bound
// on a call's own time holds only without it.
const Race = false
