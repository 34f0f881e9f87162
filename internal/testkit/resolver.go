package testkit

import (
	"context"
	"net"
	"sync"
	"testing"
)

// Resolver knows names that the system's DNS does not: A records and SRV records from
// tables the test sets. It counts the lookups of each name, and while held (Hold) answers
// nothing, whatever its context says. Safe for concurrent use.
type Resolver struct {
	mu      sync.Mutex
	ips     map[string][]string
	srv     map[string][]*net.SRV
	lookups map[string]int
	held    chan struct{} // closed when the lookups may answer; nil while not held
}

// NewResolver returns a Resolver that knows no name.
func NewResolver() *Resolver {
	return &Resolver{ips: map[string][]string{}, srv: map[string][]*net.SRV{}, lookups: map[string]int{}}
}

// Set gives host the addresses ips (none: host is unknown).
func (r *Resolver) Set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips[host] = ips
}

// AddSRV adds recs to the SRV records of name.
func (r *Resolver) AddSRV(name string, recs ...*net.SRV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv[name] = append(r.srv[name], recs...)
}

// Looked returns how many times host has been looked up.
func (r *Resolver) Looked(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// Hold makes every lookup wait, not even ending with its context, until release is called
// (safe to call more than once).
func (r *Resolver) Hold() (release func()) {
	held := make(chan struct{})
	r.mu.Lock()
	r.held = held
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}

// wait waits while the lookups are held, then counts a lookup of host.
func (r *Resolver) wait(host string) {
	r.mu.Lock()
	held := r.held
	r.mu.Unlock()
	if held != nil {
		<-held
	}
	r.mu.Lock()
	r.lookups[host]++
	r.mu.Unlock()
}

// LookupIPAddr returns host's addresses, or a DNS error that says it is not found.
func (r *Resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.wait(host)
	r.mu.Lock()
	defer r.mu.Unlock()
	ips, ok := r.ips[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(ips))
	for i, ip := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(ip)}
	}
	return out, nil
}

// LookupSRV returns name's SRV records (service and proto are not used), or a DNS error
// that says it is not found.
func (r *Resolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.wait(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	recs, ok := r.srv[name]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return name, recs, nil
}

// FreePort returns an address of 127.0.0.1 where nothing listens now: dials to it are
// refused.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
