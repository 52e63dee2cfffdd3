package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// On macOS there is no /proc, RLIMIT_AS and RLIMIT_DATA are not enforced,
// and there is no PR_SET_NO_NEW_PRIVS: a worker's memory is bounded by its
// Go memory limit, the jsvm watchdog inside it and the parent's poll of its
// resident memory with ps (every 250 ms, so a fast allocation can overshoot
// before the kill); time by the parent's kill at the deadline.

func platformHarden(workerArgs) error { return nil }

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

func residentMemory(pid int) (int64, error) {
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("ps -p %d: %w", pid, err)
	}
	kib, err := strconv.ParseInt(string(bytes.TrimSpace(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ps -p %d: %q", pid, out)
	}
	return kib << 10, nil
}

// resident reads one process's resident memory with ps.
type resident struct{ pid int }

func openResident(pid int) (*resident, error) { return &resident{pid: pid}, nil }
func (m *resident) read() (int64, error)      { return residentMemory(m.pid) }
func (m *resident) close()                    {}

const memoryPollMillis = 250

// Supported reports whether this platform runs sandbox workers.
const Supported = true

// closeOnExecInherited marks every descriptor beyond stdio close-on-exec
// (see the Linux version).
func closeOnExecInherited() {
	entries, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

func setNonblock(fd int) error { return syscall.SetNonblock(fd, true) }
