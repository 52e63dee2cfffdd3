//go:build !linux && !darwin

package sandbox

import (
	"errors"
	"syscall"
)

// Elsewhere (Windows) there are no sandbox workers: New refuses, and
// `stead dev` points to WSL.

func platformHarden(workerArgs) error { return errUnsupported }

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

func residentMemory(int) (int64, error) { return 0, errUnsupported }

type resident struct{}

func openResident(int) (*resident, error) { return nil, errUnsupported }
func (*resident) read() (int64, error)    { return 0, errUnsupported }
func (*resident) close()                  {}

const memoryPollMillis = 250

var errUnsupported = errors.New("sandbox workers need Linux or macOS")

// Supported reports whether this platform runs sandbox workers.
const Supported = false

func closeOnExecInherited() {}

func setNonblock(int) error { return errUnsupported }
