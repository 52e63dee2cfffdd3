// Package npm builds the npm packages that ship the stead binary — `npx
// getstead …` — the way esbuild ships its Go binary: a launcher package,
// getstead, whose bin runs the binary of the platform it is installed on,
// and one package per platform (getstead-<os>-<arch>) holding that binary,
// each an optional dependency of the launcher that npm installs only where
// its "os" and "cpu" match. All carry the product's version (the VERSION
// file). `make npm` writes them as npm-pack tarballs into dist/npm:
//
//	getstead-0.2.1.tgz
//	getstead-linux-x64-0.2.1.tgz   getstead-linux-arm64-0.2.1.tgz
//	getstead-darwin-x64-0.2.1.tgz  getstead-darwin-arm64-0.2.1.tgz
//	getstead-windows-x64-0.2.1.tgz
package npm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Platform is one prebuilt binary: Go's GOOS/GOARCH and npm's os/cpu.
type Platform struct {
	GOOS, GOARCH string
	OS, CPU      string
}

// Name is the platform package's name: getstead-<os>-<arch>, with the
// names people use (linux, darwin, windows; x64, arm64).
func (p Platform) Name() string { return "getstead-" + p.GOOS + "-" + p.CPU }

func (p Platform) exe() string {
	if p.GOOS == "windows" {
		return "stead.exe"
	}
	return "stead"
}

// Platforms are the platforms getstead ships a binary for.
var Platforms = []Platform{
	{"linux", "amd64", "linux", "x64"},
	{"linux", "arm64", "linux", "arm64"},
	{"darwin", "amd64", "darwin", "x64"},
	{"darwin", "arm64", "darwin", "arm64"},
	{"windows", "amd64", "win32", "x64"},
}

// Host is the platform this process runs on, if getstead ships one.
func Host() (Platform, bool) {
	for _, p := range Platforms {
		if p.GOOS == runtime.GOOS && p.GOARCH == runtime.GOARCH {
			return p, true
		}
	}
	return Platform{}, false
}

// Options say what Build builds.
type Options struct {
	// Root is the repository (the folder of go.mod).
	Root string
	// Out receives the tarballs.
	Out string
	// Version is every package's version.
	Version string
	// Platforms are the binaries to build; Platforms when nil. The
	// launcher names every platform as an optional dependency whatever is
	// built.
	Platforms []Platform
}

// Build builds the platform packages and the launcher and packs each with
// `npm pack` into o.Out. It returns the tarballs' paths, the launcher's
// first.
func Build(ctx context.Context, o Options) ([]string, error) {
	if o.Root == "" || o.Out == "" || o.Version == "" {
		return nil, errors.New("npm: Root, Out and Version are required")
	}
	if o.Platforms == nil {
		o.Platforms = Platforms
	}
	work, err := os.MkdirTemp("", "getstead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}

	launcher := filepath.Join(work, "getstead")
	if err := writeLauncher(o.Root, launcher, o.Version); err != nil {
		return nil, err
	}
	tgz, err := pack(ctx, launcher, o.Out)
	if err != nil {
		return nil, err
	}
	out := []string{tgz}
	for _, p := range o.Platforms {
		dir := filepath.Join(work, p.Name())
		if err := buildBinary(ctx, o.Root, p, filepath.Join(dir, "bin", p.exe())); err != nil {
			return nil, err
		}
		if err := writeJSON(filepath.Join(dir, "package.json"), platformManifest(p, o.Version)); err != nil {
			return nil, err
		}
		readme := fmt.Sprintf("# %s\n\nThe `stead` binary for %s %s, installed by [getstead](https://www.npmjs.com/package/getstead): run `npx getstead`.\n", p.Name(), p.OS, p.CPU)
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
			return nil, err
		}
		tgz, err := pack(ctx, dir, o.Out)
		if err != nil {
			return nil, err
		}
		out = append(out, tgz)
	}
	return out, nil
}

// manifest is the package.json of a package.
type manifest struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	License              string            `json:"license"`
	Repository           string            `json:"repository"`
	Bin                  map[string]string `json:"bin,omitempty"`
	OS                   []string          `json:"os,omitempty"`
	CPU                  []string          `json:"cpu,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	Engines              map[string]string `json:"engines,omitempty"`
	Files                []string          `json:"files,omitempty"`
}

const repository = "github:getstead/stead"

func launcherManifest(version string) manifest {
	deps := map[string]string{}
	for _, p := range Platforms {
		deps[p.Name()] = version
	}
	return manifest{
		Name:        "getstead",
		Version:     version,
		Description: "Stead's CLI and local server: AI-agent tools that must not act without a person's approval",
		License:     "UNLICENSED",
		Repository:  repository,
		// `npx getstead` runs the bin named as the package; `stead` once
		// installed.
		Bin:                  map[string]string{"getstead": "bin/getstead.js", "stead": "bin/getstead.js"},
		OptionalDependencies: deps,
		Engines:              map[string]string{"node": ">=18"},
		Files:                []string{"bin/getstead.js", "README.md"},
	}
}

func platformManifest(p Platform, version string) manifest {
	return manifest{
		Name:            p.Name(),
		Version:         version,
		Description:     fmt.Sprintf("The stead binary for %s %s (installed by getstead)", p.OS, p.CPU),
		License:         "UNLICENSED",
		Repository:      repository,
		OS:              []string{p.OS},
		CPU:             []string{p.CPU},
		PreferUnplugged: true,
		Files:           []string{"bin/" + p.exe(), "README.md"},
	}
}

func writeLauncher(root, dir, version string) error {
	src := filepath.Join(root, "npm", "getstead")
	for _, f := range []string{"bin/getstead.js", "README.md"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(f, "bin/") {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, mode); err != nil {
			return err
		}
	}
	return writeJSON(filepath.Join(dir, "package.json"), launcherManifest(version))
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// buildBinary cross-compiles the stead command for p: static, stripped,
// with no paths of this machine in it.
func buildBinary(ctx context.Context, root string, p Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cli/stead")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+p.GOOS, "GOARCH="+p.GOARCH, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build stead for %s/%s: %w\n%s", p.GOOS, p.GOARCH, err, b)
	}
	return nil
}

// pack runs `npm pack` on dir and returns the tarball it wrote into out.
func pack(ctx context.Context, dir, out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "npm", "pack", "--json", "--pack-destination", abs, dir)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm pack %s: %w\n%s", filepath.Base(dir), err, stderr.String())
	}
	var res []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res) != 1 {
		return "", fmt.Errorf("npm pack %s: unexpected output %q (%v)", filepath.Base(dir), stdout.String(), err)
	}
	return filepath.Join(abs, res[0].Filename), nil
}
