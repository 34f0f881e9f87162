package bench

import (
	"bufio"
	"fmt"
	"github.com/fluentcore/fluentcore/forwardtest"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A receiver in the client's process competes with the client on the Go scheduler: with 128
// logging goroutines it gets about 1/130 of the CPU and becomes the bottleneck, which says
// nothing about any client (fluentd runs in its own process). StartRemote runs the receiver
// in a child process instead — the running binary itself, re-executed — so the operating
// system shares the cores between client and receiver as it would between an application
// and fluentd, heap and allocation figures are the client's alone, and the receiver's own CPU
// time per entry is measured.

// remoteEnv names the receiver kind a child process serves; see MaybeServe.
const remoteEnv = "FLUENTCORE_BENCH_RECEIVER"

// Receiver kinds for StartRemote.
const (
	KindForward = "forward" // forwardtest's count-only Forward receiver
	KindLines   = "lines"   // LineReceiver
	KindClock   = "clock"   // ClockReceiver of ErrTag
	// KindWorkers is forwardtest reading each connection at the rate KindRate gives, on
	// its own: the shape of fluentd's `workers N`, where each connection lands on one
	// worker. It takes a rate only.
	KindWorkers = "workers"
	// KindSlowAck is forwardtest at the rate KindRate gives, acking each request
	// slowAckDelay after reading it while it reads on: a receiver a round trip away. It
	// takes a rate only.
	KindSlowAck = "slowack"
)

// slowAckDelay is KindSlowAck's round trip.
const slowAckDelay = time.Millisecond

// ErrTag is the tag of fluentcore's err stream in the benchmarks (Config.Tag "app").
const ErrTag = "app.err"

// MaybeServe turns the process into a receiver if it was started by StartRemote, and never
// returns then; otherwise it returns at once. Call it first thing in main or TestMain.
func MaybeServe() {
	kind := os.Getenv(remoteEnv)
	if kind == "" {
		return
	}
	if err := serve(kind, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench receiver:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// KindRate adds a read rate to a receiver kind: KindRate(KindForward, 200000) is forwardtest
// taking at most 200000 entries a second; KindRate(KindClock, n) a clock receiver taking n
// a second of the other tags.
func KindRate(kind string, perSecond int) string { return fmt.Sprintf("%s@%d", kind, perSecond) }

// KindAt has a receiver kind with a rate (KindRate) listen on addr ("127.0.0.2:24224")
// instead of a free port of 127.0.0.1: the pods behind one name, on one port of several
// loopback addresses.
func KindAt(kind, addr string) string { return kind + "#" + addr }

// KindReadBuffer fixes the kernel receive buffer of a forwardtest kind with a rate
// (KindRate) at bytes (forwardtest.WithReadBuffer): the kernel's own grows by a timing
// that differs from run to run, and what it holds in front of a slow receiver with it, by
// megabytes. Without it the kernel sizes the buffer; with a kind that has no rate, or is
// not forwardtest's, StartRemote returns an error.
func KindReadBuffer(kind string, bytes int) string { return fmt.Sprintf("%s~%d", kind, bytes) }

func startLocal(kind string) (Counter, error) {
	kind, at, _ := strings.Cut(kind, "#")
	kind, rbuf, fixed := strings.Cut(kind, "~")
	readBuffer := 0
	if fixed {
		var err error
		if readBuffer, err = strconv.Atoi(rbuf); err != nil || readBuffer <= 0 {
			return nil, fmt.Errorf("bench: bad read buffer in %q", kind+"~"+rbuf)
		}
	}
	if base, rate, ok := strings.Cut(kind, "@"); ok {
		n, err := strconv.Atoi(rate)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bench: bad receiver rate in %q", kind)
		}
		var pace forwardtest.Option
		switch base {
		case KindForward, KindSlowAck:
			pace = forwardtest.WithReadRate(float64(n))
		case KindWorkers:
			pace = forwardtest.WithConnReadRate(float64(n))
		}
		if pace != nil {
			opts := []forwardtest.Option{forwardtest.CountOnly(), forwardtest.WithLogf(nil), pace}
			if at != "" {
				opts = append(opts, forwardtest.WithAddr(at))
			}
			if base == KindSlowAck {
				opts = append(opts, forwardtest.WithAckDelay(slowAckDelay))
			}
			if fixed {
				opts = append(opts, forwardtest.WithReadBuffer(readBuffer))
			}
			r, err := forwardtest.Start(opts...)
			if err != nil {
				return nil, err
			}
			return forwardCounter{r}, nil
		}
		if fixed {
			return nil, fmt.Errorf("bench: receiver kind %q takes no read buffer", base)
		}
		if base == KindClock {
			return StartClockRate(ErrTag, float64(n))
		}
		return nil, fmt.Errorf("bench: receiver kind %q takes no rate", base)
	}
	if fixed {
		return nil, fmt.Errorf("bench: receiver kind %q takes a read buffer only with a rate", kind)
	}
	switch kind {
	case KindForward:
		return StartForward()
	case KindLines:
		return StartLines()
	case KindClock:
		return StartClock(ErrTag)
	}
	return nil, fmt.Errorf("bench: unknown receiver kind %q", kind)
}

// serve runs a receiver and answers one command per line on in:
//
//	count                    -> n <count> <violations> <cpu ns>
//	wait <want> <quiet> <max> -> n ... (durations in ns)
//	lat                      -> lat <other entries> <latency ns>... (KindClock)
//	marked                   -> marked <other entries> <of them with RareMark> (KindClock)
//	stall | resume           -> ok
//	quit                     -> ok, then the receiver closes
func serve(kind string, in io.Reader, out io.Writer) error {
	c, err := startLocal(kind)
	if err != nil {
		return err
	}
	defer c.Close()
	w := bufio.NewWriter(out)
	reply := func(format string, args ...any) error {
		fmt.Fprintf(w, format+"\n", args...)
		return w.Flush()
	}
	status := func(n int64) error {
		return reply("n %d %d %d", n, c.Violations(), processCPU().Nanoseconds())
	}
	if err := reply("addr %s", c.Addr()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "count":
			err = status(c.Count())
		case "wait":
			if len(f) != 4 {
				return fmt.Errorf("bad command %q", sc.Text())
			}
			v := make([]int64, 3)
			for i := range v {
				if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
					return err
				}
			}
			err = status(c.Wait(v[0], time.Duration(v[1]), time.Duration(v[2])))
		case "lat":
			cr, ok := c.(*ClockReceiver)
			if !ok {
				return fmt.Errorf("lat: not a clock receiver")
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "lat %d", cr.Others())
			for _, d := range cr.Latencies() {
				fmt.Fprintf(&sb, " %d", d.Nanoseconds())
			}
			err = reply("%s", sb.String())
		case "marked":
			cr, ok := c.(*ClockReceiver)
			if !ok {
				return fmt.Errorf("marked: not a clock receiver")
			}
			err = reply("marked %d %d", cr.Others(), cr.Marked())
		case "stall":
			c.Stall()
			err = reply("ok")
		case "resume":
			c.Resume()
			err = reply("ok")
		case "quit":
			return reply("ok")
		default:
			return fmt.Errorf("unknown command %q", f[0])
		}
		if err != nil {
			return err
		}
	}
	return sc.Err() // EOF: the parent is gone
}

// processCPU is the user and system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// remote is a Counter whose receiver runs in a child process.
type remote struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	addr string

	mu         sync.Mutex // one command at a time
	violations int64
	cpu        time.Duration
	closeOnce  sync.Once
	closeErr   error
}

// StartRemote starts a receiver of the given kind (KindForward or KindLines) in a child
// process: the running binary, which must call MaybeServe first thing. It returns an error if
// the child cannot start or does not report its address. The Counter's methods are safe for
// concurrent use; Close stops the child.
func StartRemote(kind string) (Counter, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), remoteEnv+"="+kind)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start receiver: %w", err)
	}
	r := &remote{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := r.out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		_ = r.Close()
		return nil, fmt.Errorf("bench: receiver did not start: %q %v", line, err)
	}
	r.addr = addr
	return r, nil
}

// call sends one command and returns the fields of the reply. A broken child is a broken
// benchmark: it panics rather than return numbers that mean nothing.
func (r *remote) call(format string, args ...any) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintf(r.in, format+"\n", args...); err != nil {
		panic(fmt.Sprintf("bench: receiver process: %v", err))
	}
	line, err := r.out.ReadString('\n')
	if err != nil {
		panic(fmt.Sprintf("bench: receiver process: %v", err))
	}
	f := strings.Fields(line)
	if len(f) == 4 && f[0] == "n" {
		r.violations, _ = strconv.ParseInt(f[2], 10, 64)
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		r.cpu = time.Duration(ns)
	}
	return f
}

func (r *remote) count(f []string) int64 {
	if len(f) != 4 || f[0] != "n" {
		panic(fmt.Sprintf("bench: receiver process: bad reply %q", f))
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}

func (r *remote) Addr() string { return r.addr }

func (r *remote) Count() int64 { return r.count(r.call("count")) }

func (r *remote) Wait(want int64, quiet, max time.Duration) int64 {
	return r.count(r.call("wait %d %d %d", want, quiet.Nanoseconds(), max.Nanoseconds()))
}

func (r *remote) Violations() int64 {
	r.call("count")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.violations
}

func (r *remote) CPU() time.Duration {
	r.call("count")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cpu
}

// Latencies returns, for a KindClock receiver, the latencies of the clocked tag's entries and
// the number of other entries received.
func (r *remote) Latencies() ([]time.Duration, int64) {
	f := r.call("lat")
	if len(f) < 2 || f[0] != "lat" {
		panic(fmt.Sprintf("bench: receiver process: bad reply to lat: %.80q", f))
	}
	others, _ := strconv.ParseInt(f[1], 10, 64)
	lat := make([]time.Duration, 0, len(f)-2)
	for _, v := range f[2:] {
		ns, _ := strconv.ParseInt(v, 10, 64)
		lat = append(lat, time.Duration(ns))
	}
	return lat, others
}

// Marked returns, for a KindClock receiver, the entries of the other tags received so far
// and how many of them contain RareMark.
func (r *remote) Marked() (others, marked int64) {
	f := r.call("marked")
	if len(f) != 3 || f[0] != "marked" {
		panic(fmt.Sprintf("bench: receiver process: bad reply to marked: %q", f))
	}
	others, _ = strconv.ParseInt(f[1], 10, 64)
	marked, _ = strconv.ParseInt(f[2], 10, 64)
	return others, marked
}

func (r *remote) Stall()  { r.call("stall") }
func (r *remote) Resume() { r.call("resume") }

// Close asks the child to quit and waits for it.
func (r *remote) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		_, _ = fmt.Fprintln(r.in, "quit")
		_ = r.in.Close()
		r.mu.Unlock()
		r.closeErr = r.cmd.Wait()
	})
	return r.closeErr
}
