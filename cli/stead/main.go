// Command stead is Stead's CLI and local server; see package stead/cli.
package main

import (
	"os"

	"stead/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
