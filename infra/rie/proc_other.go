//go:build !unix

package rie

import (
	"os"
	"os/exec"
)

// Windows has no process groups to signal; these keep the package
// building there (the emulator itself is for Linux).
func ownGroup(*exec.Cmd) {}

func killGroup(p *os.Process) { _ = p.Kill() }
