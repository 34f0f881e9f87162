package fluentcore

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maxPathSteps is the most functions of ours, outside the encoder, that one info entry
// crosses from Core.Check to the socket write.
const maxPathSteps = 10

// The path ARCHITECTURE.md lists for one info entry is the one the code takes, in at most
// maxPathSteps functions: each step's function is in its file and calls the next step's,
// except where a call stack begins (Core.Write, which zap calls after Check; sender.run, a
// goroutine's first function); and the functions of ours on the stacks that carry an entry
// — the caller's from Core.Write down to the encoder, the sender's down to the socket write
// — are listed steps, in the list's order, with none between them.
func TestOneEntryCrossesTheStepsListed(t *testing.T) {
	steps := pathSteps(t)
	if len(steps) > maxPathSteps {
		t.Errorf("ARCHITECTURE.md lists %d steps; at most %d", len(steps), maxPathSteps)
	}
	begins := map[string]bool{"Core.Check": true, "Core.Write": true, "sender.run": true}
	for i, st := range steps {
		body := funcBody(t, st.file, st.fn)
		if body == nil {
			t.Errorf("step %d: %s has no function %s", i+1, st.file, st.fn)
			continue
		}
		if i+1 < len(steps) && !begins[steps[i+1].fn] && !calls(body, steps[i+1].fn) {
			t.Errorf("step %d: %s does not call %s, the next step", i+1, st.fn, steps[i+1].fn)
		}
	}

	writer, sender := entryStacks(t)
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.fn
	}
	for _, s := range []struct {
		what        string
		stack       []string
		first, last string
	}{
		{"the caller's stack down to the encoder", writer, "Core.Write", "Stream.appendLocked"},
		{"the sender's stack down to the socket write", sender, "sender.run", "Forwarder.Post"},
	} {
		from, to := slices.Index(names, s.first), slices.Index(names, s.last)
		if from < 0 || to < from || !slices.Equal(s.stack, names[from:to+1]) {
			t.Errorf("%s crosses %v; ARCHITECTURE.md lists %v", s.what, s.stack, names[max(from, 0):max(to+1, from, 0)])
		}
	}
}

// pathStep is one step of ARCHITECTURE.md's path: a file and a function (Type.method).
type pathStep struct{ file, fn string }

var pathStepLine = regexp.MustCompile("^\\s*(\\d+)\\. \\*\\*([^,*]+), `([A-Za-z.]+)`\\*\\*")

// pathSteps reads the numbered steps of ARCHITECTURE.md's "One entry, function by function".
func pathSteps(t *testing.T) []pathStep {
	t.Helper()
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## One entry, function by function")
	if !ok {
		t.Fatal("ARCHITECTURE.md has no section \"One entry, function by function\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []pathStep
	for _, line := range strings.Split(section, "\n") {
		m := pathStepLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != len(steps)+1 {
			t.Fatalf("ARCHITECTURE.md's step %s comes after step %d", m[1], len(steps))
		}
		steps = append(steps, pathStep{file: m[2], fn: m[3]})
	}
	if len(steps) == 0 {
		t.Fatal("ARCHITECTURE.md lists no step")
	}
	return steps
}

// funcBody is the body of fn (Type.method, or a function's name) in file, nil if it has none.
func funcBody(t *testing.T, file, fn string) *ast.BlockStmt {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv, name, isMethod := strings.Cut(fn, ".")
	if !isMethod {
		recv, name = "", fn
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != name || (fd.Recv == nil) != (recv == "") {
			continue
		}
		if recv == "" || receiverType(fd.Recv.List[0].Type) == recv {
			return fd.Body
		}
	}
	return nil
}

// calls reports whether body calls a function or method named as fn's last part.
func calls(body *ast.BlockStmt, fn string) bool {
	name := fn[strings.LastIndex(fn, ".")+1:]
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			switch f := c.Fun.(type) {
			case *ast.SelectorExpr:
				found = found || f.Sel.Name == name
			case *ast.Ident:
				found = found || f.Name == name
			}
		}
		return !found
	})
	return found
}

// entryStacks logs one info entry through a core whose connection and field record the
// stacks they are called on, and returns the functions of ours on each, outermost first,
// outside the encoder: the caller's where the encoder reaches the entry's field, and the
// sender's where it writes the entry's frame to the socket.
func entryStacks(t *testing.T) (writer, sender []string) {
	r := forwardtest.NewReceiver(t)
	conns := &pathProbeDialer{}
	core := newWith(Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}}, nil, conns.dial)
	defer core.Close()
	field := &pathProbeField{}
	zap.New(core).Info("one entry", zap.Object("probe", field))
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitForEntries(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return ourFrames(field.stack), ourFrames(conns.firstWrite())
}

// ourFrames are the functions of the module in pcs (innermost first, as runtime.Callers
// gives them), outermost first, as Type.method, leaving out the encoder's packages and the
// tests.
func ourFrames(pcs []uintptr) []string {
	const module = "github.com/fluentcore/fluentcore"
	var out []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		fn := f.Function
		if strings.HasPrefix(fn, module+".") || strings.HasPrefix(fn, module+"/internal/") {
			if !strings.Contains(fn, "/internal/zapenc.") && !strings.Contains(fn, "/internal/msgpenc.") && !strings.HasSuffix(f.File, "_test.go") {
				short := fn[strings.LastIndex(fn, "/")+1:]
				short = short[strings.Index(short, ".")+1:]
				out = append(out, strings.NewReplacer("(*", "", ")", "").Replace(short))
			}
		}
		if !more {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// pathProbeField is a field that records the stack the encoder marshals it on.
type pathProbeField struct{ stack []uintptr }

func (p *pathProbeField) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	p.stack = callers()
	enc.AddString("k", "v")
	return nil
}

// pathProbeDialer dials the receiver and records the stack of the first write on any of its
// connections: a frame's (the info stream's connection has no handshake).
type pathProbeDialer struct {
	mu    sync.Mutex
	stack []uintptr
}

func (d *pathProbeDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return pathProbeConn{Conn: c, d: d}, nil
}

func (d *pathProbeDialer) firstWrite() []uintptr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stack
}

type pathProbeConn struct {
	net.Conn
	d *pathProbeDialer
}

func (c pathProbeConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	if c.d.stack == nil {
		c.d.stack = callers()
	}
	c.d.mu.Unlock()
	return c.Conn.Write(b)
}

// callers is the stack of its caller's caller, innermost first.
func callers() []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(3, pcs)]
}
