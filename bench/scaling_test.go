package bench

import (
	"fmt"
	"testing"
)

// BenchmarkScaling is fluentcore's AddingFields from exactly 1, 16, 256 and 1024 goroutines,
// measured like the scenarios (flush and delivery inside the timer), with the degrade policy
// off (what the pipeline carries when nothing is sampled away) and zap's JSON core to
// io.Discard at the same counts for reference. Target (issue 5): ns/op at 1024 goroutines at
// most 1.5 × ns/op at 1.
func BenchmarkScaling(b *testing.B) {
	for _, g := range []int{1, 16, 256, 1024} {
		for _, c := range lineup() {
			if c.name != "fluentcore" && c.name != "fluentcore-degrade-off" && c.name != refName {
				continue
			}
			b.Run(fmt.Sprintf("goroutines=%d/contender=%s", g, c.name), func(b *testing.B) {
				measure(b, c.open(b, addingFields), inGoroutines(g))
			})
		}
	}
}
