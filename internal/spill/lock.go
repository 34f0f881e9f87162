package spill

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// errLocked is flock's answer when another open file holds the lock.
var errLocked = errors.New("locked")

// lockDir takes the exclusive lock of path (Spill.Dir/LOCK) without waiting. The lock
// belongs to the open file, so it also keeps out a second core of the same process, and
// the kernel releases it when the process dies however it dies. The holder's pid is
// written into the file for humans; it plays no part in the locking. Closing the file
// releases the lock.
func lockDir(path string) (*os.File, error) {
	f, err := flock(path)
	if errors.Is(err, errLocked) {
		owner, _ := os.ReadFile(path)
		who := strings.TrimSpace(string(owner))
		if who == "" {
			who = "unknown"
		}
		return nil, fmt.Errorf("fluentcore: Spill.Dir %s is in use by another core (pid %s): spill disabled, err entries go to Spill.Fallback", strings.TrimSuffix(path, string(os.PathSeparator)+lockName), who)
	}
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
