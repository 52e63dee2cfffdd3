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

const memoryPollMillis = 250

// Supported reports whether this platform runs sandbox workers.
const Supported = true

// socketpair returns a connected pair of close-on-exec Unix stream sockets.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	return fds, err
}

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
