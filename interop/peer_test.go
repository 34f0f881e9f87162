package interop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a peer may take to print its "listening" line.
const startTimeout = 30 * time.Second

// peer is a receiver running as a child process. It prints {"listening": addr} once it
// accepts connections, then one JSON line per entry it received; its stderr goes to the
// test log. The process is killed, and its output drained, at the test's cleanup.
type peer struct {
	name string
	addr string

	mu      sync.Mutex
	lines   []json.RawMessage // entry lines, in arrival order
	exitErr error             // set when stdout ends: the process is gone
	done    bool
	changed chan struct{} // closed and replaced on every change
}

// startPeer runs cmd and waits for its "listening" line. It fails the test if the peer
// cannot start.
func startPeer(t *testing.T, name string, cmd *exec.Cmd) *peer {
	t.Helper()
	p := &peer{name: name, changed: make(chan struct{})}
	stdin, err := cmd.StdinPipe() // the peers exit on EOF: no orphan if the test binary dies
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}

	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		p.readStdout(stdout)
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Logf("%s stderr: %s", name, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		readers.Wait() // before Wait, which closes the pipes, and before the test ends
		_ = cmd.Wait()
	})

	deadline := time.Now().Add(startTimeout)
	for {
		p.mu.Lock()
		addr, done, exitErr, ch := p.addr, p.done, p.exitErr, p.changed
		p.mu.Unlock()
		if addr != "" {
			return p
		}
		if done {
			t.Fatalf("%s exited before listening: %v", name, exitErr)
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s did not start listening within %v", name, startTimeout)
		}
	}
}

func (p *peer) readStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := append(json.RawMessage(nil), sc.Bytes()...)
		var ready struct {
			Listening string `json:"listening"`
		}
		p.mu.Lock()
		if p.addr == "" && json.Unmarshal(line, &ready) == nil && ready.Listening != "" {
			p.addr = ready.Listening
		} else {
			p.lines = append(p.lines, line)
		}
		p.notifyLocked()
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
	p.mu.Lock()
	p.done = true
	p.exitErr = sc.Err()
	if p.exitErr == nil {
		p.exitErr = io.EOF
	}
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *peer) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitLines waits until the peer has printed at least n entry lines and returns all of
// them; it fails if the peer exits or timeout passes first.
func (p *peer) waitLines(n int, timeout time.Duration) ([]json.RawMessage, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		got, done, exitErr, ch := len(p.lines), p.done, p.exitErr, p.changed
		lines := append([]json.RawMessage(nil), p.lines...)
		p.mu.Unlock()
		if got >= n {
			return lines, nil
		}
		if done {
			return lines, fmt.Errorf("%s exited after %d of %d entries: %v", p.name, got, n, exitErr)
		}
		select {
		case <-ch:
		case <-deadline.C:
			return lines, fmt.Errorf("%s printed %d of %d entries within %v", p.name, got, n, timeout)
		}
	}
}

// count returns how many entry lines the peer has printed so far.
func (p *peer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}
