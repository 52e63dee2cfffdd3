package cli

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"stead/runtime/agent"
)

// scaffold is what `stead init` writes: a TypeScript handler file, its
// stead.json, the types of the handler's context, a tsconfig for editors,
// and a .gitignore ("gitignore" here: embed leaves dotfiles out).
//
//go:embed scaffold
var scaffold embed.FS

// scaffoldFiles maps each file of the scaffold to the name it gets.
var scaffoldFiles = map[string]string{
	"handlers.ts":   "handlers.ts",
	"stead.json":    "stead.json",
	"stead.d.ts":    "stead.d.ts",
	"tsconfig.json": "tsconfig.json",
	"gitignore":     ".gitignore",
}

func (a *app) initCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Start a project: a TypeScript handler, its stead.json and the types of the handler's context",
		Long: `Write a new project into DIR (default: the current folder; made if missing):

  handlers.ts        two tool handlers, typed
  stead.json         an agent with a read step and an approval-gated write; its
                     $schema is stead.schema.json, for editors' completion
  stead.schema.json  the schema of stead.json this CLI checks
  stead.d.ts         the types of a handler's context (broker, recordCost, …)
  tsconfig.json      for editors and tsc --noEmit
  .gitignore

It refuses, changing nothing, when any of them exists. Then: stead deploy DIR.`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return a.initProject(dir)
		},
	}
}

func (a *app) initProject(dir string) error {
	files := map[string][]byte{"stead.schema.json": agent.ConfigSchema()}
	for src, dst := range scaffoldFiles {
		b, err := fs.ReadFile(scaffold, "scaffold/"+src)
		if err != nil {
			return err
		}
		files[dst] = b
	}
	var exist []string
	for name := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			exist = append(exist, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(exist) > 0 {
		slices.Sort(exist)
		return fmt.Errorf("%s already has %s: stead init writes only into a folder without them (nothing was written); pick another folder", dir, strings.Join(exist, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		// O_EXCL: a file that appeared since the check is not overwritten.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, werr := f.Write(files[name])
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	if a.jsonFlag {
		return printValue(a.stdout(), map[string]any{"dir": dir, "files": names})
	}
	w := a.stdout()
	fmt.Fprintf(w, "wrote a project into %s: %s\n\n", dir, strings.Join(names, ", "))
	fmt.Fprintf(w, "Next:\n  stead deploy %s\n", dir)
	fmt.Fprintln(w, `  stead run notify-customer --input '{"message":"Your refund is on its way"}' --end-user demo-user --wait`)
	fmt.Fprintln(w, "  stead approvals && stead approve ID")
	return nil
}
