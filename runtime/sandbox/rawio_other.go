//go:build !linux

package sandbox

import (
	"errors"
	"io"
	"syscall"
)

// Elsewhere the channel is read and written as any file.

func newReader(c syscall.Conn) (io.Reader, error) {
	if r, ok := c.(io.Reader); ok {
		return r, nil
	}
	return nil, errors.New("the channel cannot be read")
}

func newWriter(c syscall.Conn) (io.Writer, error) {
	if w, ok := c.(io.Writer); ok {
		return w, nil
	}
	return nil, errors.New("the channel cannot be written")
}
