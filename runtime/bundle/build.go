package bundle

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// PackOptions tune Pack.
type PackOptions struct {
	// MaxSize bounds the produced bundle; DefaultMaxSize when zero.
	MaxSize int
	// Root is the folder the bundle's source map names its sources
	// relative to (stead.json's), so that stacks read "src/handlers.ts:12:5";
	// the entry's folder when empty.
	Root string
}

// Pack bundles a source entry point (.js, .mjs, .ts, with relative imports
// and node_modules dependencies) into one self-contained ESM file, as
// `stead deploy` uploads it. Node builtins and packages that are not
// installed are refused with file:line. Errors are *Error naming files
// relative to the entry's folder, Root or not (the CLI rebases them onto
// stead.json's folder); stacks, through the map, are relative to Root.
func Pack(ctx context.Context, entry string, o PackOptions) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(entry)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", entry, err)
	}
	root := filepath.Dir(abs)
	if o.Root != "" {
		if root, err = filepath.Abs(o.Root); err != nil {
			return nil, fmt.Errorf("pack %s: %w", entry, err)
		}
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{abs},
		AbsWorkingDir: filepath.Dir(abs),
		Bundle:        true,
		Format:        api.FormatESModule,
		Platform:      api.PlatformNeutral,
		MainFields:    []string{"module", "main"},
		Conditions:    []string{"import", "default"},
		Target:        api.ESNext,
		// Never written: the map's sources are relative to its folder.
		Outfile:       filepath.Join(root, "handlers.mjs"),
		Write:         false,
		LogLevel:      api.LogLevelSilent,
		Charset:       api.CharsetUTF8,
		LegalComments: api.LegalCommentsNone,
		// The map travels inside the bundle (see inlineMap), without the
		// sources' text: only positions are needed.
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
	})
	if len(res.Errors) > 0 {
		return nil, messagesError(res.Errors, filepath.Dir(abs), nil)
	}
	var out, sm []byte
	for _, f := range res.OutputFiles {
		switch {
		case strings.HasSuffix(f.Path, ".mjs"):
			out = f.Contents
		case strings.HasSuffix(f.Path, ".map"):
			sm = f.Contents
		}
	}
	if out == nil {
		return nil, fmt.Errorf("pack %s: esbuild produced no output", entry)
	}
	if err := checkSize(filepath.Base(entry), len(out), o.MaxSize); err != nil {
		return nil, err
	}
	if with := inlineMap(out, sm); checkSize("", len(with), o.MaxSize) == nil {
		// A bundle near the limit goes without its map: positions then
		// point into the bundle instead of the sources.
		out = with
	}
	return out, nil
}

func checkSize(name string, n, limit int) error {
	if limit <= 0 {
		limit = DefaultMaxSize
	}
	if n > limit {
		return &Error{Code: CodeTooLarge, File: name,
			Message: fmt.Sprintf("bundle is %s, over the %s limit; drop unused dependencies or raise the limit", FormatSize(int64(n)), FormatSize(int64(limit)))}
	}
	return nil
}

// FormatSize renders a byte count the way people read it: "812 bytes",
// "3.4 KiB", "5.0 MiB".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// goja lacks these; esbuild lowers them.
var lowered = map[string]bool{
	"async-generator":      false,
	"for-await":            false,
	"regexp-match-indices": false,
}

// refuseImports fails every import the bundle still has: a deployed bundle
// must be self-contained, and nothing on the server's disk may be read into it.
var refuseImports = api.Plugin{
	Name: "stead-self-contained",
	Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			if a.Kind == api.ResolveEntryPoint {
				return api.OnResolveResult{}, nil
			}
			return api.OnResolveResult{}, fmt.Errorf("%w %q", errUnresolved, a.Path)
		})
	},
}

var errUnresolved = fmt.Errorf("unresolved import")

// toScript converts a deployed ESM bundle into a CommonJS script body and its
// source map: to the bundle's sources when it carries their map (a bundle
// Pack made), else to the ESM file.
func toScript(name string, esm []byte) (code, sourceMap []byte, err error) {
	res := api.Build(api.BuildOptions{
		Stdin: &api.StdinOptions{
			Contents:   sealMap(esm),
			Sourcefile: name,
			Loader:     api.LoaderJS,
		},
		Bundle:         true,
		Plugins:        []api.Plugin{refuseImports},
		Format:         api.FormatCommonJS,
		Platform:       api.PlatformNeutral,
		Target:         api.ES2022,
		Supported:      lowered,
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
		Outfile:        name + ".cjs",
		Write:          false,
		LogLevel:       api.LogLevelSilent,
		Charset:        api.CharsetUTF8,
		LegalComments:  api.LegalCommentsNone,
	})
	if len(res.Errors) > 0 {
		return nil, nil, messagesError(res.Errors, "", positionsOf(esm))
	}
	for _, f := range res.OutputFiles {
		switch {
		case strings.HasSuffix(f.Path, ".map"):
			sourceMap = f.Contents
		case strings.HasSuffix(f.Path, ".cjs"):
			code = f.Contents
		}
	}
	if code == nil {
		return nil, nil, fmt.Errorf("convert %s: esbuild produced no output", name)
	}
	return code, sourceMap, nil
}

// messagesError turns esbuild's messages into one *Error naming file:line:
// relative to dir when set, and mapped to the bundle's sources by pos when
// it has their map.
func messagesError(msgs []api.Message, dir string, pos *positions) error {
	var errs []*Error
	for _, m := range msgs {
		e := &Error{Code: CodeSyntax, Message: m.Text}
		switch {
		case strings.Contains(m.Text, "Top-level await"):
			e.Code = CodeTopLevelAwait
			e.Message = "top-level await is not supported; move the await into a handler"
		case strings.Contains(m.Text, errUnresolved.Error()):
			// Our plugin's refusal (esbuild names the plugin in PluginName, not in Text).
			e.Code = CodeUnresolvedImport
			e.Message = m.Text +
				"; a deployed bundle must be self-contained: bundle dependencies with `stead deploy` (Node builtins such as fs are not available)"
		case strings.HasPrefix(m.Text, "Could not resolve"):
			e.Code = CodeUnresolvedImport
			e.Message = m.Text + "; Node builtins are not available, and packages must be installed (npm install) before bundling"
			importer := ""
			if l := m.Location; l != nil && dir != "" {
				importer = filepath.Join(dir, l.File)
			}
			if spec, err := strconv.Unquote(strings.TrimPrefix(m.Text, "Could not resolve ")); err == nil {
				if msg, ok := missingFile(spec, importer); ok {
					e.Message = msg
				}
			}
		}
		if l := m.Location; l != nil {
			e.File, e.Line, e.Column = l.File, l.Line, l.Column+1
			if f, line, col, ok := pos.at(e.Line, e.Column); ok {
				e.File, e.Line, e.Column = f, line, col
			}
			if dir != "" {
				if rel, err := filepath.Rel(dir, filepath.Join(dir, l.File)); err == nil {
					e.File = rel
				}
			}
		}
		errs = append(errs, e)
	}
	first := errs[0]
	first.More = errs[1:]
	return first
}
