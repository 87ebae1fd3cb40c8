package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// classifyCompressErr maps a codec failure onto what the producer is told:
// compress_failed, permanent (an error result at once) when the data or
// its parameters are at fault (a refused bound, invalid arguments, output
// that does not fit), transient (handed back, at most max_deliver
// deliveries, then compress_failed) when the device is: out of memory,
// a launch that failed, a GPU reset or lost. A retry of the same snapshot
// can succeed on a device whose memory was freed, on another lane, or in a
// restarted sidecar; retrying bad data only repeats the failure.
func classifyCompressErr(err error) error {
	var ie *ingest.Error
	if errors.As(err, &ie) { // already classified (truncated, bad segment…)
		return err
	}
	e := &ingest.Error{Code: ingest.CodeCompress, Message: err.Error()}
	if deviceTransient(err) {
		return transientErr{e}
	}
	return e
}

// deviceTransient says whether err is a device condition that another
// attempt may not meet. An error that says so itself (a Transient() bool
// method anywhere in its chain) decides; otherwise the CUDA error number
// in the message, which the GPU library writes as "CUDA error N: …"
// (fzgpu_strerror, cuda/fzgpu.h: codes >= 1000 are rc-1000 cudaError_t).
// Unknown errors stay permanent, as before: a retry loop on a bug helps
// no one.
func deviceTransient(err error) bool {
	var t interface{ Transient() bool }
	if errors.As(err, &t) {
		return t.Transient()
	}
	msg := err.Error()
	i := strings.Index(msg, "CUDA error ")
	if i < 0 {
		return false
	}
	rest := msg[i+len("CUDA error "):]
	j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if j <= 0 {
		return false
	}
	code, err := strconv.Atoi(rest[:j])
	return err == nil && transientCUDA[code]
}

// transientCUDA are the cudaError_t values (CUDA 12 numbering) of device
// conditions rather than bad arguments: resources, launches and sticky
// kernel faults (the context is unusable until the device is reset), a
// device reset or lost. Not here, so permanent: invalid value (1),
// invalid configuration (9), invalid device pointer (17) and the like,
// which the same snapshot would meet again.
var transientCUDA = map[int]bool{
	2:   true, // cudaErrorMemoryAllocation: out of memory
	3:   true, // cudaErrorInitializationError
	4:   true, // cudaErrorCudartUnloading
	46:  true, // cudaErrorDevicesUnavailable: exclusive mode, busy
	100: true, // cudaErrorNoDevice
	201: true, // cudaErrorDeviceUninitialized: invalid context, e.g. after a reset
	214: true, // cudaErrorECCUncorrectable
	400: true, // cudaErrorInvalidResourceHandle: streams/events gone after a reset
	700: true, // cudaErrorIllegalAddress (sticky)
	701: true, // cudaErrorLaunchOutOfResources
	702: true, // cudaErrorLaunchTimeout
	709: true, // cudaErrorContextIsDestroyed
	714: true, // cudaErrorHardwareStackError (sticky)
	715: true, // cudaErrorIllegalInstruction (sticky)
	716: true, // cudaErrorMisalignedAddress (sticky)
	719: true, // cudaErrorLaunchFailure (sticky)
	802: true, // cudaErrorSystemNotReady
	909: true, // cudaErrorTimeout
	999: true, // cudaErrorUnknown
}
