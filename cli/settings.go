package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultURL is where `stead dev` listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:8720"

// Environment variables the CLI reads.
const (
	EnvURL    = "STEAD_URL"
	EnvKey    = "STEAD_KEY"
	EnvConfig = "STEAD_CONFIG"
)

// FileConfig is the CLI's config file, written by `stead dev` and `stead
// login` with mode 0600: where the API is and the key to use.
type FileConfig struct {
	URL string `json:"url"`
	Key string `json:"key"`
}

// configPath is $STEAD_CONFIG, else <user config dir>/stead/config.json.
func configPath(getenv func(string) string) (string, error) {
	if p := getenv(EnvConfig); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config folder: %w; set %s to a file path", err, EnvConfig)
	}
	return filepath.Join(dir, "stead", "config.json"), nil
}

// readConfig reads the config file; a missing file is an empty config.
func readConfig(path string) (FileConfig, error) {
	var c FileConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read config %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("config %s is not valid JSON (%w); fix it, or run `stead login` to write it again", path, err)
	}
	return c, nil
}

// writeConfig writes the config file with mode 0600 (its folder 0700),
// atomically.
func writeConfig(path string, c FileConfig) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'), 0o600)
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it over path, so readers never see half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// settings is where the API is and what key to use, and where each came
// from (for error messages).
type settings struct {
	URL, URLFrom string
	Key, KeyFrom string
}

// settings resolves --url/--key > STEAD_URL/STEAD_KEY > the config file.
func (a *app) settings() (settings, error) {
	s := settings{URL: a.urlFlag, URLFrom: "--url", Key: a.keyFlag, KeyFrom: "--key"}
	if s.URL == "" {
		s.URL, s.URLFrom = a.env.Getenv(EnvURL), "$"+EnvURL
	}
	if s.Key == "" {
		s.Key, s.KeyFrom = a.env.Getenv(EnvKey), "$"+EnvKey
	}
	if s.URL == "" || s.Key == "" {
		path, err := configPath(a.env.Getenv)
		if err != nil {
			return s, err
		}
		c, err := readConfig(path)
		if err != nil {
			return s, err
		}
		if s.URL == "" && c.URL != "" {
			s.URL, s.URLFrom = c.URL, path
		}
		if s.Key == "" && c.Key != "" {
			s.Key, s.KeyFrom = c.Key, path
		}
	}
	if s.URL == "" {
		s.URL, s.URLFrom = DefaultURL, "the default"
	}
	s.URL = strings.TrimRight(s.URL, "/")
	if s.Key == "" {
		s.KeyFrom = ""
		return s, errors.New("no API key: run `stead dev` (it writes one) or `stead login --url URL --key KEY`, or set " + EnvKey)
	}
	return s, nil
}
