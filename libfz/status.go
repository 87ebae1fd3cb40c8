package main

/*
#include "cgo.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// statusError carries an explicit status code for errors that no sentinel
// classifies (bad arguments, buffer sizes).
type statusError struct {
	code C.fz_status
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func invalid(format string, a ...any) error {
	return &statusError{C.FZ_EINVAL, fmt.Errorf(format, a...)}
}

func sizeErr(format string, a ...any) error {
	return &statusError{C.FZ_ESIZE, fmt.Errorf(format, a...)}
}

// codeOf maps an error to its status.
func codeOf(err error) C.fz_status {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.code
	case errors.Is(err, sinks.ErrChecksum):
		return C.FZ_ECHECKSUM
	case errors.Is(err, fz.ErrFormat):
		return C.FZ_EFORMAT
	case errors.Is(err, sinks.ErrNotFound):
		return C.FZ_ENOTFOUND
	case errors.Is(err, sinks.ErrBadURL):
		return C.FZ_EINVAL
	}
	return C.FZ_EIO
}

func setError(msg string) {
	if msg == "" {
		C.fzgo_set_error(nil, 0)
		return
	}
	b := []byte(msg)
	C.fzgo_set_error((*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)))
}

// call runs one export's body: a nil error is FZ_OK and clears the
// thread's message; an error or a panic sets it and returns the code.
func call(f func() error) (st C.fz_status) {
	defer func() {
		if r := recover(); r != nil {
			setError(fmt.Sprintf("libfz internal error (please report): %v\n%s", r, debug.Stack()))
			st = C.FZ_EINTERNAL
		}
	}()
	if err := f(); err != nil {
		setError(err.Error())
		return codeOf(err)
	}
	setError("")
	return C.FZ_OK
}

// cbytes views n bytes of C memory at p (nil for n == 0); NULL with n > 0
// is an error.
func cbytes(p unsafe.Pointer, n C.uint64_t, what string) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, invalid("%s is NULL but its length is %d", what, uint64(n))
	}
	if uint64(n) > 1<<62 {
		return nil, invalid("%s length %d is impossible", what, uint64(n))
	}
	return unsafe.Slice((*byte)(p), int(n)), nil
}

// cmalloc copies b into malloc'd memory owned by the caller.
func cmalloc(b []byte) unsafe.Pointer {
	p := C.malloc(C.size_t(max(len(b), 1)))
	if p == nil {
		panic(fmt.Sprintf("malloc of %d bytes failed", len(b)))
	}
	if len(b) > 0 {
		copy(unsafe.Slice((*byte)(p), len(b)), b)
	}
	return p
}
