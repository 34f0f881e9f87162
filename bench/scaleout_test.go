package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

// scaleOutRate is what each throttled receiver, or each connection of the workers shape,
// reads a second in BenchmarkScaleOut: below what one fluentd worker decodes (PROTOCOL.md:
// 240–280 k entries/s on 2 cores), so that on this machine the receiver is the limit and
// not the client.
const scaleOutRate = 150_000

var scaleOutLength = flag.Duration("bench.scaleout", 3*time.Second, "how long BenchmarkScaleOut measures each shape")

// BenchmarkScaleOut is what one info stream delivers to receivers that are slower per
// connection than the client (issue 16), flat out from 64 goroutines with degrade off, so
// that delivery is measured and not admission, on one connection and on Info.Connections 4
// (the fast shape also on 2 and 8; acks: BenchmarkMaxInflight):
//   - four-servers: four receivers, each reading scaleOutRate entries a second, in Servers;
//   - workers: one receiver that reads each connection at scaleOutRate (fluentd's
//     `workers N` behind one port);
//   - fast: the in-process-speed receiver with no limit: what more connections cost or
//     bring when the receiver is not slow per connection, the choice of Info.Connections'
//     default for one server (of-R is then only relative);
//   - four-addresses: four receivers each reading scaleOutRate entries a second on one port
//     of 127.0.0.1 to 127.0.0.4, behind one name (Addr "tcp://fleet.bench:PORT", through
//     Config.Transport.Resolver): a Kubernetes headless service over four aggregator pods.
//
// connections=default leaves Info.Connections at 0 (one per server, each address of a name
// counted; issue 27).
//
// It reports entries delivered a second in the steady state (after a tenth of the run, once
// the buffers are full) and that rate over scaleOutRate (of-R). Timed by the clock, not by b.N:
// run it with -benchtime 1x.
func BenchmarkScaleOut(b *testing.B) {
	four := make([]string, 4)
	for i := range four {
		four[i] = KindRate(KindForward, scaleOutRate)
	}
	for _, shape := range []struct {
		name  string
		kinds []string
		ack   bool
		conns int // Info.Connections
	}{
		{"four-servers", four, false, 1},
		{"four-servers", four, false, 4},
		{"four-servers", four, false, 0},
		{"four-addresses", nil, false, 0},
		{"four-addresses", nil, false, 1},
		{"workers", []string{KindRate(KindWorkers, scaleOutRate)}, false, 1},
		{"workers", []string{KindRate(KindWorkers, scaleOutRate)}, false, 4},
		{"fast", []string{KindForward}, false, 0},
		{"fast", []string{KindForward}, false, 1},
		{"fast", []string{KindForward}, false, 2},
		{"fast", []string{KindForward}, false, 4},
		{"fast", []string{KindForward}, false, 8},
	} {
		conns := fmt.Sprint(shape.conns)
		if shape.conns == 0 {
			conns = "default"
		}
		b.Run(fmt.Sprintf("shape=%s/connections=%s", shape.name, conns), func(b *testing.B) {
			kinds, name := shape.kinds, (*nameResolver)(nil)
			if shape.name == "four-addresses" {
				kinds, name = fourAddresses(b)
			}
			scaleOut(b, kinds, func(c *fluentcore.Config) {
				if shape.ack {
					c.Info.Acks = fluentcore.AcksOn
				}
				c.Info.Connections = shape.conns
				if name != nil {
					c.Servers, c.Addr, c.Transport.Resolver = nil, "tcp://fleet.bench:"+name.port, name
				}
			})
		})
	}
}

// nameResolver resolves fleet.bench to 127.0.0.1 to 127.0.0.4.
type nameResolver struct{ port string }

func (nameResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if host != "fleet.bench" {
		return nil, errors.New("no such host " + host)
	}
	var out []net.IPAddr
	for i := 1; i <= 4; i++ {
		out = append(out, net.IPAddr{IP: net.IPv4(127, 0, 0, byte(i))})
	}
	return out, nil
}

// fourAddresses returns the kinds of four receivers reading scaleOutRate each on one free
// port of 127.0.0.1 to 127.0.0.4, and the resolver of their name.
func fourAddresses(b *testing.B) ([]string, *nameResolver) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	kinds := make([]string, 4)
	for i := range kinds {
		kinds[i] = KindAt(KindRate(KindForward, scaleOutRate), fmt.Sprintf("127.0.0.%d:%s", i+1, port))
	}
	return kinds, &nameResolver{port: port}
}

// BenchmarkMaxInflight is the ack-delay shape of BenchmarkScaleOut (one receiver reading
// scaleOutRate entries a second, acking each request 1 ms after reading it) at several
// Transport.MaxInflight values, and the same receiver without acks: what the default of
// Config.Transport.MaxInflight is chosen by. Those run with degrade off; degrade=adaptive runs the
// default Transport.MaxInflight, and no acks, under the default policy, which holds the buffer about
// half full, frames in flight included: whether the window still keeps the receiver busy
// there. Run it with -benchtime 1x.
func BenchmarkMaxInflight(b *testing.B) {
	kinds := []string{KindRate(KindSlowAck, scaleOutRate)}
	for _, n := range []int{1, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("acks=on/inflight=%d", n), func(b *testing.B) {
			scaleOut(b, kinds, func(c *fluentcore.Config) { c.Info.Acks, c.Transport.MaxInflight = fluentcore.AcksOn, n })
		})
	}
	b.Run("acks=off", func(b *testing.B) { scaleOut(b, kinds, nil) })
	adaptive := func(c *fluentcore.Config) { c.Degrade.Policy = fluentcore.DegradeAdaptive }
	b.Run("degrade=adaptive/acks=on", func(b *testing.B) {
		scaleOut(b, kinds, func(c *fluentcore.Config) { adaptive(c); c.Info.Acks = fluentcore.AcksOn })
	})
	b.Run("degrade=adaptive/acks=off", func(b *testing.B) { scaleOut(b, kinds, adaptive) })
}

// scaleOut measures one shape: receivers of the given kinds (several: as Servers), the
// info stream flat out from 64 goroutines with degrade off unless mod sets a policy,
// configured further by mod.
func scaleOut(b *testing.B, kinds []string, mod func(*fluentcore.Config)) {
	recvs := make([]Counter, len(kinds))
	for i, kind := range kinds {
		recvs[i] = mustStartReceiver(b, kind)
		defer recvs[i].Close()
	}
	core := newFluentcore(recvs[0].Addr(), func(c *fluentcore.Config) {
		c.Degrade.Policy = fluentcore.DegradeOff
		c.Spill.Fallback = io.Discard
		if len(recvs) > 1 {
			c.Addr = ""
			for _, r := range recvs {
				c.Servers = append(c.Servers, fluentcore.Server{Addr: r.Addr()})
			}
		}
		if mod != nil {
			mod(c)
		}
	})
	defer core.Close()
	logger := zap.New(core)
	LogFields(logger)
	if err := core.Sync(); err != nil { // connected before the clock starts
		b.Fatal(err)
	}
	received := func() (n int64) {
		for _, r := range recvs {
			n += r.Count()
		}
		return n
	}
	stop := startProducers(logger, 64, nil)
	b.ResetTimer()
	time.Sleep(*scaleOutLength / 10) // the load runs for this long before it is measured
	n0, t0 := received(), time.Now()
	time.Sleep(*scaleOutLength)
	n1, t1 := received(), time.Now()
	b.StopTimer()
	stop()
	rate := float64(n1-n0) / t1.Sub(t0).Seconds()
	b.ReportMetric(rate, "delivered/s")
	b.ReportMetric(rate/scaleOutRate, "of-R")
}
