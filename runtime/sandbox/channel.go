package sandbox

import (
	"bufio"
	"io"
	"os"
)

// The channel between a parent and its worker is two pipes, one each way:
// the worker writes its frames to its fd 3 and reads the parent's from its
// fd 4. Pipes, not a Unix socket pair: reading from a socket frees buffer
// space, which wakes the peer's poller with a write-readiness event that no
// one waits for — one more wake-up of the other process per frame — while a
// pipe wakes its writer only when it was full.

// Descriptors of the worker's ends, as the worker sees them.
const (
	workerOutFD = 3
	workerInFD  = 4
)

// channel is one side of the pipes: frames are read from in (through br)
// and written to out (through w).
type channel struct {
	in, out *os.File
	br      *bufio.Reader
	w       io.Writer
}

func newChannel(in, out *os.File) (*channel, error) {
	r, err := newReader(in)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(out)
	if err != nil {
		return nil, err
	}
	return &channel{in: in, out: out, br: bufio.NewReaderSize(r, 64<<10), w: w}, nil
}

// close closes both ends, ending any read or write in progress.
func (c *channel) close() {
	_ = c.in.Close()
	_ = c.out.Close()
}

// pipes returns the parent's ends of a new worker's channel and the
// worker's (its fd 3 and fd 4, in that order, for exec.Cmd.ExtraFiles).
func pipes() (in, out *os.File, worker []*os.File, err error) {
	in, workerOut, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	workerIn, out, err := os.Pipe()
	if err != nil {
		_ = in.Close()
		_ = workerOut.Close()
		return nil, nil, nil, err
	}
	return in, out, []*os.File{workerOut, workerIn}, nil
}
