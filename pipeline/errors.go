package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/fzsidecar/fzsidecar/ingest"
)

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks a Store error that retrying will not fix (bad key,
// permission denied). Unmarked errors are treated as transient and the
// snapshot is redelivered later.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

var errTransient = errors.New("transient")

type transientErr struct{ err error }

func (t transientErr) Error() string        { return t.err.Error() }
func (t transientErr) Unwrap() []error      { return []error{t.err, errTransient} }
func (t transientErr) Is(target error) bool { return target == errTransient }

// isRetry says whether a snapshot goes back to JetStream (no result) rather
// than getting an error result: transient store trouble and shutdown.
func isRetry(err error) bool {
	return errors.Is(err, errTransient) || errors.Is(err, errDrainTimeout) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classifyStoreErr maps a Store error onto what the producer is told.
func classifyStoreErr(loc string, err error) error {
	var ie *ingest.Error
	switch {
	case errors.As(err, &ie):
		return err
	case errors.Is(err, ErrConflict):
		return &ingest.Error{Code: ingest.CodeConflict, Message: fmt.Sprintf("%s: %v", loc, err)}
	case isPermanent(err):
		return &ingest.Error{Code: ingest.CodeStore, Message: fmt.Sprintf("%s: %v", loc, err)}
	case errors.Is(err, errDrainTimeout), errors.Is(err, context.Canceled):
		return err
	}
	return transientErr{fmt.Errorf("store %s: %w", loc, err)}
}
