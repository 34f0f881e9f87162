//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fluentcore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockSpillDir takes an exclusive flock on path without waiting. flock belongs to the open
// file, so it also keeps out a second core of the same process, and the kernel releases it
// when the process dies however it dies. The holder's pid is written into the file for
// humans; it plays no part in the locking.
func lockSpillDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fluentcore: SpillDir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		var owner []byte
		owner, _ = os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(owner))
			if who == "" {
				who = "unknown"
			}
			return nil, fmt.Errorf("fluentcore: SpillDir %s is in use by another core (pid %s): spill disabled, err entries go to ErrFallback", strings.TrimSuffix(path, string(os.PathSeparator)+spillLockName), who)
		}
		return nil, fmt.Errorf("fluentcore: SpillDir lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// unlockSpillDir releases the lock (closing the file drops the flock).
func unlockSpillDir(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}
