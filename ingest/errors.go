package ingest

import (
	"errors"
	"fmt"
)

// Code classifies an error reply so producers in any language can react to
// it without parsing the message text.
type Code string

const (
	// Notification problems: the producer sent something the sidecar cannot use.
	CodeMalformed    Code = "malformed"           // not JSON, or a field of the wrong JSON type
	CodeVersion      Code = "unsupported_version" // protocol version the sidecar does not speak
	CodeInvalid      Code = "invalid"             // a field is missing or out of range (dtype, dims, bound, names…)
	CodeBadSegment   Code = "bad_segment"         // segment path outside the shm dir, not a regular file, …
	CodeNoSegment    Code = "missing_segment"     // segment file does not exist
	CodeSizeMismatch Code = "size_mismatch"       // dims × dtype size ≠ length, or offset+length beyond the file
	CodeTruncated    Code = "truncated"           // segment shrank while the sidecar was reading it
	CodeTooLarge     Code = "too_large"           // snapshot larger than the whole budget

	// Processing problems.
	CodeCompress Code = "compress_failed"
	CodeConflict Code = "conflict" // the sink already holds different bytes for run/var/step
	CodeStore    Code = "store_failed"
	CodeInternal Code = "internal"

	// Admission.
	CodeBudgetFull   Code = "budget_full"
	CodeUnavailable  Code = "unavailable"   // no sidecar answered
	CodeLeaseUnknown Code = "lease_unknown" // a renewal for an admission the sidecar no longer holds
)

// Error is the typed error carried in replies. It travels as JSON
// {"code": "...", "message": "..."}.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is makes errors.Is(err, ErrBudgetFull) and friends match on the code alone.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
	}
	return false
}

// Sentinels for errors.Is; they match any *Error with the same code.
var (
	ErrBudgetFull  = &Error{Code: CodeBudgetFull}
	ErrTooLarge    = &Error{Code: CodeTooLarge}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrConflict    = &Error{Code: CodeConflict}
)

func errorf(code Code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// AsError converts any error into the wire form; untyped errors become
// CodeInternal so that no error reaches a producer without a code.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" {
			return &Error{Code: e.Code, Message: err.Error()}
		}
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
