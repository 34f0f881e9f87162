//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package spill

import (
	"errors"
	"os"
)

// flock: this platform has no flock in package syscall, so the spill cannot make sure it
// owns its directory; it stays off, the directory untouched, and the core reports why.
func flock(string) (*os.File, error) {
	return nil, errors.New("fluentcore: Spill.Dir is not supported on this platform (no flock): spill disabled, err entries go to Spill.Fallback")
}
