package sinks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// ErrInvalid is wrapped by Put errors for a key or metadata the sink will
// never accept (a name it cannot store, a non-finite bound): another
// attempt with the same arguments fails the same way.
var ErrInvalid = errors.New("invalid key or metadata")

func invalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalid, err) }

// Retryable reports whether a failed Put might succeed if tried again later
// with the same arguments: a full or failing disk, an unreachable or
// throttling S3 endpoint, an S3 operation that ran out of attempts. It is
// false for what only a person can fix: a conflicting object, an invalid key
// or metadata, permission denied, a read-only file system, a missing bucket,
// rejected credentials.
//
// The sidecar answers non-retryable failures at once with an error result
// and retries the others a bounded number of times (docs/PIPELINE.md).
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.Is(err, ErrConflict), errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound),
		errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	// S3: the retry loop marks exhausted attempts permanent so that nested
	// retries do not multiply; for a later delivery they are still worth
	// another try. Classify the underlying answer instead.
	var pe permanentError
	for errors.As(err, &pe) {
		err = pe.error
	}
	if errResp(err).Code == "" {
		return true // not an S3 answer: I/O trouble, network
	}
	return retryable(err)
}
