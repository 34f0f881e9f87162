module github.com/fluentcore/fluentcore

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
	github.com/tinylib/msgp v1.6.5
	go.uber.org/goleak v1.3.0
	go.uber.org/multierr v1.10.0
	go.uber.org/zap v1.28.0
	go.uber.org/zap/exp v0.3.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/mod v0.18.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/tools v0.22.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

tool github.com/tinylib/msgp
