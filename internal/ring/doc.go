// Package ring holds a stream's buffers: the batches of encoded entries that writers fill
// and senders frame and send (Batch), and the way round they go, from the free list to a
// sender and back, in sealing order (Ring). It uses neither the sink nor the forwarders;
// both use it.
package ring
