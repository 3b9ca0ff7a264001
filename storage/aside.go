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
// first (ErrLocked while a process has the store open). A dir that does
// not exist (the disk was replaced) is created and nothing is moved; the
// returned path is then "".
func SetAside(dir, suffix string) (string, error) {
	if suffix == "" {
		return "", errors.New("storage: SetAside needs a suffix")
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", errors.Join(os.MkdirAll(dir, 0o700), fileutil.SyncDir(filepath.Dir(dir)))
	} else if err != nil {
		return "", err
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
