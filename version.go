// Package stead holds what the whole product shares: its version, kept in
// one place (the VERSION file) for the CLI, the npm packages and the docs.
package stead

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the product's version, as the VERSION file says ("0.2.1").
func Version() string { return strings.TrimSpace(versionFile) }
