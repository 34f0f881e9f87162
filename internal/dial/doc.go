// Package dial is how fluentcore reaches its receivers: address parsing, endpoints with
// their TLS settings, dialing (transport, then TLS), the retry schedule, the servers' health
// (shared by a stream's connections) and the balancer that chooses the server of each new
// connection. Pure logic where it can be: the balancer and the health take time as an
// argument. It imports no other fluentcore package (see ARCHITECTURE.md).
package dial
