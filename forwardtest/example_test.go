package forwardtest_test

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/tinylib/msgp/msgp"
)

// A receiver outside a test: start it, point a client at Addr, read what arrived.
func ExampleStart() {
	recv, err := forwardtest.Start()
	if err != nil {
		panic(err)
	}
	defer recv.Close()

	// A minimal client: one Message-mode request, [tag, time, record].
	conn, err := net.Dial("tcp", strings.TrimPrefix(recv.Addr(), "tcp://"))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	b := msgp.AppendArrayHeader(nil, 3)
	b = msgp.AppendString(b, "shop.orders")
	b = msgp.AppendInt64(b, 1700000000)
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(b, "msg")
	b = msgp.AppendString(b, "order placed")
	b = msgp.AppendString(b, "items")
	b = msgp.AppendInt(b, 3)
	if _, err := conn.Write(b); err != nil {
		panic(err)
	}

	entries, err := recv.WaitForEntries(1, 5*time.Second)
	if err != nil {
		panic(err)
	}
	e := entries[0]
	fmt.Println(e.Mode, e.Tag, e.Time.Format(time.RFC3339), e.Record["msg"], e.Record["items"])
	fmt.Printf("%+v\n", recv.Stats())
	// Output:
	// Message shop.orders 2023-11-14T22:13:20Z order placed 3
	// {Connections:1 Frames:1 Entries:1 Bytes:43 Acks:0 Truncated:0 Violations:0 Handshakes:0 HandshakeFailures:0 FaultedAcks:0}
}
