// Package ring holds a stream's buffers: the batches of encoded entries that writers fill
// and senders frame and send. It uses neither the sink nor the forwarders; both use it.
package ring
