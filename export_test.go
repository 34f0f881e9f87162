package fluentcore

// Test helpers shared with the external test package (core_test.go): the conformance
// normalisation of encoder_msgp_test.go, so both compare records to zap's JSON one way.
var (
	NormMsgp   = normMsgp
	NormJSON   = normJSON
	DiffValues = diff
	WaitUntil  = waitUntil
)
