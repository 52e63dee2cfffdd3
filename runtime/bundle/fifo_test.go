package bundle_test

import (
	"os"
	"syscall"
)

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// openWriter opens a fifo for writing without blocking: it fails while no
// reader has the fifo open.
func openWriter(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
}
