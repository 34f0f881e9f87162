module github.com/fluentcore/fluentcore

go 1.26.0

require (
	github.com/tinylib/msgp v1.6.5
	go.uber.org/goleak v1.3.0
	go.uber.org/multierr v1.10.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/philhofer/fwd v1.2.0 // indirect
	golang.org/x/mod v0.18.0 // indirect
	golang.org/x/tools v0.22.0 // indirect
)

tool github.com/tinylib/msgp
