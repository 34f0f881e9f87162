package fluentcore

import "github.com/fluentcore/fluentcore/internal/testkit"

// Test helpers shared with the external test package (core_test.go): the conformance
// normalisation of encoder_msgp_test.go, so both compare records to zap's JSON one way.
var (
	NormMsgp   = normMsgp
	NormJSON   = normJSON
	DiffValues = diff
	WaitUntil  = waitUntil
	// IdentityHolds checks entries = delivered + spilled + dropped for both streams.
	IdentityHolds = identityHolds
)

// steadyAllocs is testkit.SteadyAllocs, under the name the tests of this package use.
var steadyAllocs = testkit.SteadyAllocs

// settingsFor returns cfg's settings, whatever resolve thinks of cfg.
func settingsFor(cfg Config) *settings {
	s, _ := resolve(cfg)
	return s
}

// sinkOf returns the sink behind a Core made by New.
func sinkOf(c *Core) *sink { return c.sink }
