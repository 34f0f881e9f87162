//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package spill

import (
	"errors"
	"os"
)

// tryLock: this platform has no flock in package syscall, so the spill cannot make sure it
// owns its directory; it stays off, and the core reports why.
func tryLock(*os.File) error {
	return errors.New("fluentcore: SpillDir is not supported on this platform (no flock): spill disabled, err entries go to ErrFallback")
}
