package bench

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// refName is the reference contender: every ratio in the tables is to its ns/op in the same
// run, scenario and mode.
const refName = "zap-json-discard"

func init() {
	register(contender{name: refName, rank: 2, sugar: true, open: openZapDiscard})
	register(contender{name: "zap-json-bws-tcp", rank: 3, sugar: true, open: openZapTCP})
}

func newZapJSONConfig() zapcore.EncoderConfig { return zap.NewProductionEncoderConfig() }

func newZapJSON(ws zapcore.WriteSyncer, opts ...zap.Option) *zap.Logger {
	enc := zapcore.NewJSONEncoder(newZapJSONConfig())
	return zap.New(zapcore.NewCore(enc, ws, zap.InfoLevel), opts...)
}

// openZapDiscard is zap's production JSON core writing to io.Discard: the encoding cost every
// zap user pays, with no I/O.
func openZapDiscard(_ testing.TB, s scenario) *client {
	l := newZapJSON(zapcore.AddSync(io.Discard))
	return &client{
		log:     zapLog(l, s),
		finish:  l.Sync,
		refused: func() uint64 { return 0 },
		close:   func() {},
	}
}

// countingWriter counts the writes zap makes to its ErrorOutput: one per failed entry write.
type countingWriter struct{ n atomic.Uint64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(1); return len(p), nil }

// openZapTCP is what a user wires by hand: zap's JSON core through a BufferedWriteSyncer
// (default 256 KiB buffer, 30s flush interval) to a TCP socket. The receiver counts lines.
func openZapTCP(tb testing.TB, s scenario) *client {
	r, err := StartRemote(KindLines)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.Addr(), "tcp://"))
	if err != nil {
		tb.Fatal(err)
	}
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(conn)}
	errs := &countingWriter{}
	l := newZapJSON(ws, zap.ErrorOutput(zapcore.AddSync(errs)))
	return &client{
		log:     zapLog(l, s),
		finish:  l.Sync,
		sync:    l.Sync,
		refused: errs.n.Load,
		recv:    r,
		close: func() {
			_ = ws.Stop()
			_ = conn.Close()
			_ = r.Close()
		},
	}
}
