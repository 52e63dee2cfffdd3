package sandbox

import (
	"io"
	"syscall"
	"unsafe"
)

// On Linux the channel is read and written with raw system calls
// (RawSyscall: no entersyscall, so the Go scheduler is not told), waiting
// for readiness through the runtime's poller as net and os do. The
// descriptors are nonblocking, so a call never blocks. A plain read or
// write wakes the runtime's sysmon thread whenever the process was idle
// before it: a futex wake-up, then sysmon's 20 µs sleeps until it parks
// again — 16% of the worker's CPU and 21% of the parent's in a warm call
// (perf, BenchmarkInvokeWarm), which a call now does without.

// rawReader reads a nonblocking descriptor. One goroutine reads at a time.
type rawReader struct {
	rc    syscall.RawConn
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // r.read, bound once
}

func newReader(c syscall.Conn) (io.Reader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &rawReader{rc: rc}
	r.fn = r.read
	return r, nil
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.rc.Read(r.fn) // closed, or past the read deadline
	n, errno := r.n, r.errno
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read makes one read; it reports false to wait for readiness.
func (r *rawReader) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case 0:
			r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.errno = e
			return true
		}
	}
}

// rawWriter writes a nonblocking descriptor. One goroutine writes at a
// time.
type rawWriter struct {
	rc    syscall.RawConn
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // w.write, bound once
}

func newWriter(c syscall.Conn) (io.Writer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &rawWriter{rc: rc}
	w.fn = w.write
	return w, nil
}

func (w *rawWriter) Write(p []byte) (int, error) {
	w.p, w.n, w.errno = p, 0, 0
	err := w.rc.Write(w.fn) // closed, or past the write deadline
	n, errno := w.n, w.errno
	w.p = nil
	switch {
	case errno != 0:
		return n, errno
	case err != nil:
		return n, err
	}
	return n, nil
}

// write writes what is left of w.p; it reports false to wait for room.
func (w *rawWriter) write(fd uintptr) bool {
	for w.n < len(w.p) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.p[w.n])), uintptr(len(w.p)-w.n))
		switch e {
		case 0:
			w.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.errno = e
			return true
		}
	}
	return true
}
