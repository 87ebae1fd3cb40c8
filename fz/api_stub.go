package fz

import (
	"context"
	"errors"
)

// Stats describe one compression.
type Stats struct {
	RawBytes        uint64
	CompressedBytes uint64
	AbsEB           float64 // absolute error bound used
	MaxAbsErr       float64 // largest |x − x'| over the finite values
	Outliers        uint64  // values stored losslessly
}

// Ratio is RawBytes / CompressedBytes.
func (s Stats) Ratio() float64 {
	if s.CompressedBytes == 0 {
		return 0
	}
	return float64(s.RawBytes) / float64(s.CompressedBytes)
}

var errNotYet = errors.New("fz: not implemented yet")

// Compress encodes src (raw little-endian elements of p.DType) into a
// self-describing container.
func Compress(ctx context.Context, src []byte, p Params, opts ...Option) ([]byte, Stats, error) {
	return nil, Stats{}, errNotYet
}

// Decompress decodes a container into raw little-endian elements.
func Decompress(ctx context.Context, blob []byte, opts ...Option) (*Header, []byte, error) {
	return nil, nil, errNotYet
}

// ReadHeader parses and checks the header and chunk index of a container.
func ReadHeader(blob []byte) (*Header, error) { return nil, errNotYet }

// Header is the parsed container header.
type Header struct {
	DType DType
	Dims  []uint64
	Mode  Mode
	Bound float64
	AbsEB float64
	Fill  *float64
}

// Option configures Compress and Decompress.
type Option func(*options)

type options struct{}
