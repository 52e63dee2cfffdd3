package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux a worker sets PR_SET_NO_NEW_PRIVS (nothing it executes can gain
// privileges), lowers its scheduling priority (workers yield the CPU to the
// server), and limits its data segment (RLIMIT_DATA: the heap Go maps
// counts, its PROT_NONE reservations do not, so the Go runtime starts where
// RLIMIT_AS would not let it); the parent reads its resident memory from
// /proc, and a worker whose parent dies gets SIGKILL (Pdeathsig), even when
// it is stuck in native code.

// workerNice is how much lower than the parent's a worker's priority is.
const workerNice = 5

func platformHarden(a workerArgs) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err == nil {
		// Getpriority returns 20 - nice.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, min(19, 20-prio+workerNice))
	}
	if a.dataLimit > 0 && !raceEnabled {
		lim := &unix.Rlimit{Cur: uint64(a.dataLimit), Max: uint64(a.dataLimit)}
		if err := unix.Setrlimit(unix.RLIMIT_DATA, lim); err != nil {
			return fmt.Errorf("set RLIMIT_DATA: %w", err)
		}
	}
	return nil
}

func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pageSize is the unit of /proc/PID/statm.
var pageSize = int64(os.Getpagesize())

// residentMemory returns a process's resident set size in bytes.
func residentMemory(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("read /proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/statm: %w", pid, err)
	}
	return pages * pageSize, nil
}

// memoryPoll is how often the parent reads a busy worker's resident memory.
const memoryPollMillis = 10

// Supported reports whether this platform runs sandbox workers.
const Supported = true

// socketpair returns a connected pair of close-on-exec Unix stream sockets.
func socketpair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}

// closeOnExecInherited marks every descriptor this process has beyond
// stdio close-on-exec. Go opens its own that way; this catches those the
// process inherited from whatever started it, so that a worker inherits
// nothing but its channel.
func closeOnExecInherited() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
