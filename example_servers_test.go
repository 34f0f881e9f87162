package fluentcore_test

import (
	"net/http"

	"github.com/fluentcore/fluentcore"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Several servers take the info stream at once, one connection each, by weight; the
// standby only while the others are down (docs/servers.md). Compiled, not run.
func Example_severalServers() {
	core := fluentcore.New(fluentcore.Config{Servers: []fluentcore.Server{
		{Addr: "tcp://agg-a:24224"},
		{Addr: "tcp://agg-b:24224", Weight: 30},
		{Addr: "tcp://agg-c:24224", Standby: true},
	}})
	defer core.Close()
}

// A Kubernetes headless service: every ready pod's address is a server, looked up again
// every Transport.ResolveInterval; the metrics are on the default registry, which promhttp.Handler()
// serves (docs/servers.md). Compiled, not run.
func Example_headlessService() {
	core := fluentcore.New(fluentcore.Config{Addr: "tcp://fluentd-aggregator.logging.svc.cluster.local:24224"})
	defer core.Close()
	http.Handle("/metrics", promhttp.Handler())
}

// DNS SRV discovery: the name's SRV targets are the servers, the lowest priority's regular,
// with the records' weights (docs/servers.md). Compiled, not run.
func Example_srv() {
	core := fluentcore.New(fluentcore.Config{Addr: "srv://_fluentd._tcp.fluentd-aggregator.logging.svc.cluster.local"})
	defer core.Close()
}
