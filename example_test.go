package fluentcore_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// The basic use: a Core per process, closed on the way out, a zap.Logger on top of it. The
// embedded receiver stands in for fluentd here.
func Example() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()

	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "shop"})
	logger := zap.New(core)
	logger.Info("order placed", zap.String("id", "o-1"), zap.Int("items", 3))
	logger.Error("payment failed", zap.String("id", "o-1"))
	_ = core.Close() // flushes and delivers

	entries, _ := receiver.WaitForEntries(2, 5*time.Second)
	for _, e := range entries {
		fmt.Println(e.Tag, e.Record["msg"], e.Record["id"])
	}
	// Unordered output:
	// shop.info order placed o-1
	// shop.err payment failed o-1
}

// The sugared logger and accumulated context work as with any zap core.
func Example_sugared() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "shop"})

	sugar := zap.New(core).With(zap.String("service", "cart")).Sugar()
	sugar.Infow("cache miss", "key", "user-42")
	_ = core.Close()

	entries, _ := receiver.WaitForEntries(1, 5*time.Second)
	r := entries[0].Record
	fmt.Println(r["msg"], r["service"], r["key"])
	// Output: cache miss cart user-42
}

// log/slog through zap's zapslog handler: slog's groups become nested maps.
func Example_slog() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "shop"})

	logger := slog.New(zapslog.NewHandler(core))
	logger.WithGroup("http").Info("request handled", "method", "GET", "status", 200)
	_ = core.Close()

	entries, _ := receiver.WaitForEntries(1, 5*time.Second)
	fmt.Println(entries[0].Tag, entries[0].Record["msg"], entries[0].Record["http"])
	// Output: shop.info request handled map[method:GET status:200]
}

// Validate reports every problem of a Config, for programs that want to fail fast.
func ExampleConfig_Validate() {
	err := fluentcore.Config{Addr: "http://fluentd:24224", Transport: fluentcore.TransportConfig{FlushInterval: -time.Second}}.Validate()
	fmt.Println(err)
	// Output:
	// fluentcore: address "http://fluentd:24224": scheme must be tcp, tls, unix or srv (tcp://host:port, host:port, tls://host:port, unix:///path, srv://_service._proto.name)
	// fluentcore: Transport.FlushInterval is negative (-1s)
}

// Metrics go to the Registerer you pass; Stats has the same numbers without Prometheus.
func ExampleCore_Stats() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	reg := prometheus.NewRegistry()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Metrics: fluentcore.MetricsConfig{Registerer: reg}})

	logger := zap.New(core)
	for i := 0; i < 3; i++ {
		logger.Info("tick", zap.Int("i", i))
	}
	_ = core.Sync()
	n, _ := testutil.GatherAndCount(reg, "fluentcore_delivered_entries_total")
	fmt.Println("delivered series:", n)

	_ = core.Close() // unregisters the metrics; Stats still answers
	st := core.Stats()
	fmt.Println("entries", st.Info.Entries, "delivered", st.Info.Delivered, "dropped", st.Info.DroppedTotal())
	// Output:
	// delivered series: 2
	// entries 3 delivered 3 dropped 0
}

// Testing your own logging: point the core at a forwardtest receiver and inspect what
// arrived, as fluentd would see it.
func ExampleCore_Sync() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "billing"})
	defer core.Close()

	zap.New(core).Warn("quota low", zap.Int("left", 5))
	if err := core.Sync(); err != nil { // delivered when Sync returns nil
		fmt.Println(err)
	}
	entries, _ := receiver.WaitForEntries(1, 5*time.Second)
	e := entries[0]
	fmt.Println(e.Tag, e.Record["level"], e.Record["left"], strings.HasPrefix(e.Mode.String(), "Packed"))
	// Output: billing.info warn 5 true
}

// Twelve-factor services read their settings from FLUENT_* variables; what cannot be text
// (a Registerer, a TLS config) is added in code.
func ExampleConfigFromEnv() {
	os.Setenv("FLUENT_ADDR", "tcp://fluentd.internal:24224")
	os.Setenv("FLUENT_TAG", "shop")
	os.Setenv("FLUENT_TRANSPORT_FLUSH_INTERVAL", "250ms")
	os.Setenv("FLUENT_DEGRADE_POLICY", "keep_warn")
	defer func() {
		for _, k := range []string{"FLUENT_ADDR", "FLUENT_TAG", "FLUENT_TRANSPORT_FLUSH_INTERVAL", "FLUENT_DEGRADE_POLICY"} {
			os.Unsetenv(k)
		}
	}()

	cfg, err := fluentcore.ConfigFromEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Addr, cfg.Tag, cfg.Transport.FlushInterval, cfg.Degrade.Policy)
	// Output: tcp://fluentd.internal:24224 shop 250ms keep_warn
}
