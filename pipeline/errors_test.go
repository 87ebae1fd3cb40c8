package pipeline

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fzsidecar/fzsidecar/ingest"
)

type selfClassified struct{ transient bool }

func (e selfClassified) Error() string   { return "CUDA error 2: out of memory" }
func (e selfClassified) Transient() bool { return e.transient }

func TestClassifyCompressErr(t *testing.T) {
	for _, c := range []struct {
		err       error
		transient bool
	}{
		{errors.New("compress: CUDA error 2: out of memory"), true},
		{fmt.Errorf("lane 3: %w", errors.New("range: CUDA error 700: an illegal memory access was encountered")), true},
		{errors.New("compress: CUDA error 719: unspecified launch failure"), true},
		{errors.New("compress: CUDA error 1: invalid argument"), false},
		{errors.New("compress: CUDA error 9: invalid configuration argument"), false},
		{errors.New("compress: invalid argument"), false},
		{errors.New("compress: output buffer too small"), false},
		{errors.New("the GPU's error bound differs from fz.DeriveBound's"), false},
		{errors.New("CUDA error : nothing"), false},
		{errors.New("CUDA error 99999999999999999999: overflow"), false},
		{selfClassified{false}, false}, // its own word beats its message
		{fmt.Errorf("x: %w", selfClassified{true}), true},
	} {
		got := classifyCompressErr(c.err)
		var ie *ingest.Error
		if !errors.As(got, &ie) || ie.Code != ingest.CodeCompress || ie.Message != c.err.Error() {
			t.Errorf("%v: classified as %v, want compress_failed with the message", c.err, got)
		}
		if isRetry(got) != c.transient {
			t.Errorf("%v: transient = %v, want %v", c.err, isRetry(got), c.transient)
		}
	}
	// Already an ingest error: unchanged.
	tr := &ingest.Error{Code: ingest.CodeTruncated, Message: "shrank"}
	if got := classifyCompressErr(tr); got != tr {
		t.Errorf("ingest error reclassified: %v", got)
	}
}
