package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// SetAside moves the data directory dir to dir+suffix and leaves an empty
// dir in its place, for a replica rebuilt from the others: what was there
// is kept for a post-mortem, never read again. It takes the store's lock
// first (ErrLocked while a process has the store open).
func SetAside(dir, suffix string) (string, error) {
	if suffix == "" {
		return "", errors.New("storage: SetAside needs a suffix")
	}
	lock, err := fileutil.LockDir(dir)
	if err != nil {
		if errors.Is(err, fileutil.ErrLocked) {
			return "", fmt.Errorf("%w: %s (stop the server first)", ErrLocked, dir)
		}
		return "", err
	}
	defer lock.Unlock()
	aside := dir + suffix
	if _, err := os.Stat(aside); err == nil {
		return "", fmt.Errorf("storage: %s already exists", aside)
	}
	if err := os.Rename(dir, aside); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return aside, err
	}
	return aside, fileutil.SyncDir(filepath.Dir(dir))
}
