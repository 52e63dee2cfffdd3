package sandbox

import (
	"bytes"
	"fmt"
	"io"
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
	m, err := openResident(pid)
	if err != nil {
		return 0, err
	}
	defer m.close()
	return m.read()
}

// resident reads one process's resident memory, again and again: its
// /proc/PID/statm stays open (a read is one pread, not open, read and
// close), and once the process is gone reads fail rather than find a new
// process that was given its PID.
type resident struct {
	pid int
	f   *os.File
	buf [128]byte
}

func openResident(pid int) (*resident, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return nil, err
	}
	return &resident{pid: pid, f: f}, nil
}

func (m *resident) read() (int64, error) {
	n, err := m.f.ReadAt(m.buf[:], 0)
	if err != nil && (err != io.EOF || n == 0) {
		return 0, fmt.Errorf("read /proc/%d/statm: %w", m.pid, err)
	}
	b := m.buf[:n]
	// size resident shared text lib data dt, in pages
	_, rest, _ := bytes.Cut(b, []byte{' '})
	field, _, _ := bytes.Cut(rest, []byte{' '})
	pages, err := strconv.ParseInt(string(field), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/statm: %q", m.pid, b)
	}
	return pages * pageSize, nil
}

func (m *resident) close() { _ = m.f.Close() }

// memoryPoll is how often the parent reads a busy worker's resident memory.
const memoryPollMillis = 10

// Supported reports whether this platform runs sandbox workers.
const Supported = true

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

func setNonblock(fd int) error { return syscall.SetNonblock(fd, true) }
