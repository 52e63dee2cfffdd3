// Command stead is Stead's CLI and local server; see package stead/cli.
package main

import (
	"os"

	"stead/cli"
	"stead/runtime/sandbox"
)

func main() {
	sandbox.Main() // a handler's sandbox worker, started by `stead dev`
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
