//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package spill

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting: errLocked if another open file
// holds it.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return errLocked
	}
	return fmt.Errorf("fluentcore: SpillDir lock: %w", err)
}
