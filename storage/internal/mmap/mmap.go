// Package mmap maps file regions into memory and syncs them back. Only the
// primitives the storage engines need: map a whole preallocated file
// read-write, msync a sub-range, advise, unmap.
package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

var pageSize = os.Getpagesize()

// Map maps the first size bytes of f read-write and shared. The file must
// already be at least size bytes long (preallocated): touching a mapped page
// beyond the end of the file raises SIGBUS.
func Map(f *os.File, size int) ([]byte, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return b, nil
}

// MapReadOnly maps the first size bytes of f read-only.
func MapReadOnly(f *os.File, size int) ([]byte, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return b, nil
}

// Sync writes the dirty pages of b[from:to] back to the file and waits for
// the device (msync MS_SYNC). from is rounded down to a page boundary.
func Sync(b []byte, from, to int) error {
	if to > len(b) {
		to = len(b)
	}
	from -= from % pageSize
	if from < 0 {
		from = 0
	}
	if from >= to {
		return nil
	}
	return unix.Msync(b[from:to], unix.MS_SYNC)
}

// Unmap releases the mapping. b must not be used afterwards.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

// AdviseSequential hints the kernel that b will be read sequentially.
func AdviseSequential(b []byte) error { return unix.Madvise(b, unix.MADV_SEQUENTIAL) }

// AdviseWillNeed asks the kernel to read b ahead.
func AdviseWillNeed(b []byte) error { return unix.Madvise(b, unix.MADV_WILLNEED) }
