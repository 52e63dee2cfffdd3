// Command build writes the getstead npm packages (package npm) as npm-pack
// tarballs: `go run ./npm/build [-out dist/npm] [-host]`, from the
// repository's root. `make npm` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"stead"
	"stead/npm"
)

func main() {
	out := flag.String("out", "dist/npm", "folder for the tarballs")
	host := flag.Bool("host", false, "build the binary of this platform only (the launcher still names every platform)")
	flag.Parse()
	o := npm.Options{Root: ".", Out: *out, Version: stead.Version()}
	if *host {
		p, ok := npm.Host()
		if !ok {
			fmt.Fprintln(os.Stderr, "build: getstead ships no binary for this platform")
			os.Exit(1)
		}
		o.Platforms = []npm.Platform{p}
	}
	tgzs, err := npm.Build(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	for _, t := range tgzs {
		fmt.Println(t)
	}
}
