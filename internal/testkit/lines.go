package testkit

import (
	"bytes"
	"strings"
	"sync"
)

// Lines is an io.Writer that keeps what is written to it, for a test to read while another
// goroutine writes: a Spill.Fallback, most often. Its zero value is ready to use. It is safe
// for concurrent use.
type Lines struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int // complete lines in b
}

// Write keeps p. It never fails. It is safe for concurrent use.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += bytes.Count(p, []byte("\n"))
	return l.b.Write(p)
}

// Count returns how many complete lines (each ended by '\n') have been written. It is safe
// for concurrent use.
func (l *Lines) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Records returns how many complete lines are err records: Count less the lines of the
// core's own reports (logger "fluentcore", such as the one Close writes when it could not
// deliver everything). It is safe for concurrent use.
func (l *Lines) Records() int {
	n := 0
	for _, line := range l.Lines() {
		if !strings.Contains(line, `"logger":"fluentcore"`) {
			n++
		}
	}
	return n
}

// Lines returns the complete lines written so far, in order, without their '\n'; an
// unfinished last line is left out. It is safe for concurrent use.
func (l *Lines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	end := strings.LastIndexByte(s, '\n')
	if end < 0 {
		return nil
	}
	return strings.Split(s[:end], "\n")
}

// Len returns the bytes written so far. It is safe for concurrent use.
func (l *Lines) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// Cap returns the bytes of the buffer that holds what was written: the heap it takes. It is
// safe for concurrent use.
func (l *Lines) Cap() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Cap()
}

// Grow makes room for n more bytes at once, so that a test measuring the heap sees none of
// the buffer's growth while they are written. It is safe for concurrent use.
func (l *Lines) Grow(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Grow(n)
}

// String returns all that has been written, unfinished last line included. It is safe for
// concurrent use.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
