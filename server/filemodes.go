package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/rs/zerolog"
)

// The data dir holds secrets: the receipt keyring (config/receipt-keys.json
// and its records in the CommitLog; config/receipt.key before it), the
// push secrets of the groups (config/groups.json, and the registry
// records in the CommitLog segments themselves). The store creates it
// 0700 and writes its config files 0600; secureDataDir brings a data dir
// made by an older version (0755, 0644) to the same modes at start, with
// a warning, so that no other user of the host can read those secrets.

// secureDataDir makes dir and dir/config 0700 and the files in dir/config
// 0600 where group or others had access. Failures are logged, not fatal:
// the store works either way.
func secureDataDir(dir string, log zerolog.Logger) {
	if runtime.GOOS == "windows" {
		return
	}
	tighten := func(path string, want os.FileMode) {
		info, err := os.Lstat(path)
		if err != nil || info.Mode()&os.ModeSymlink != 0 || info.Mode().Perm()&^want == 0 {
			return
		}
		was := info.Mode().Perm()
		if err := os.Chmod(path, info.Mode().Perm()&want); err != nil {
			log.Warn().Err(err).Str("path", path).Msg("cannot restrict the mode of a data dir entry that may hold secrets")
			return
		}
		log.Warn().Str("path", path).Str("was", was.String()).Str("now", (was & want).String()).
			Msg("restricted the mode of a data dir entry that may hold secrets (receipt key, push secrets)")
	}
	tighten(dir, 0o700)
	config := filepath.Join(dir, "config")
	tighten(config, 0o700)
	entries, err := os.ReadDir(config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn().Err(err).Str("path", config).Msg("cannot list the config dir to check its modes")
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			tighten(filepath.Join(config, e.Name()), 0o600)
		}
	}
}
