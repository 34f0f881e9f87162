//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fluentcore

import (
	"errors"
	"os"
)

// lockSpillDir: this platform has no flock in package syscall, so the spill cannot make
// sure it owns its directory; it stays off, and New reports why.
func lockSpillDir(string) (*os.File, error) {
	return nil, errors.New("fluentcore: SpillDir is not supported on this platform (no flock): spill disabled, err entries go to ErrFallback")
}

func unlockSpillDir(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}
