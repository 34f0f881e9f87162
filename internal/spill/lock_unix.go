//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package spill

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flock opens path (creating it) and takes an exclusive flock on it without waiting:
// errLocked if another open file holds it.
func flock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fluentcore: Spill.Dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("fluentcore: Spill.Dir lock: %w", err)
	}
	return f, nil
}
