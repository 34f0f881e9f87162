package testkit

import (
	"runtime"
	rtmetrics "runtime/metrics"
)

// LiveHeap returns the bytes of live heap objects, exactly: it runs a garbage collection,
// then reads MemStats.HeapAlloc. The collection stops the world, so call it around what is
// measured, not during. It is safe for concurrent use.
func LiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// LastLiveHeap returns the live heap the last garbage collection found, without forcing
// one: for sampling the heap while goroutines being measured run. It lags LiveHeap by up
// to a GC cycle. It is safe for concurrent use.
func LastLiveHeap() uint64 {
	return readUint64("/gc/heap/live:bytes")
}

// HeapAllocated returns the bytes allocated on the heap since the process started, freed
// or not (coarse: counted per span, not per object). The difference of two readings is
// what was allocated in between, whatever the collector did meanwhile. It is safe for
// concurrent use.
func HeapAllocated() uint64 {
	return readUint64("/gc/heap/allocs:bytes")
}

func readUint64(metric string) uint64 {
	s := []rtmetrics.Sample{{Name: metric}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}
