module github.com/fluentcore/fluentcore/bench

go 1.26.0

replace github.com/fluentcore/fluentcore => ../

require (
	github.com/IBM/fluent-forward-go v0.4.0
	github.com/fluent/fluent-logger-golang v1.10.2
	github.com/fluentcore/fluentcore v0.0.0-00010101000000-000000000000
	github.com/google/pprof v0.0.0-20250403155104-27863c87afa6
	github.com/lestrrat-go/fluent-client v1.0.0
	github.com/tinylib/msgp v1.6.5
	go.uber.org/zap v1.28.0
	golang.org/x/image v0.47.0
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.4.2 // indirect
	github.com/lestrrat-go/backoff/v2 v2.0.3 // indirect
	github.com/lestrrat-go/bufferpool v0.0.0-20180220091733-e7784e1b3e37 // indirect
	github.com/lestrrat-go/msgpack v1.0.0 // indirect
	github.com/lestrrat-go/option v0.0.0-20210103042652-6f1ecfceda35 // indirect
	github.com/lestrrat-go/pdebug v0.0.0-20200204225717-4d6bd78da58d // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
