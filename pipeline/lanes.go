package pipeline

import (
	"context"

	"github.com/fzsidecar/fzsidecar/fz"
)

// Lanes spreads calls over several codecs, each used by one call at a time:
// one lane per GPU (`--gpus 0,1`), so each device runs its own stream of
// snapshots. A call takes whichever lane is free first. Every lane must
// produce the same bytes (the CPU and GPU backends do), so which lane ran a
// snapshot never shows in the output.
func Lanes(codecs ...Codec) Codec {
	if len(codecs) == 1 {
		return codecs[0]
	}
	free := make(chan Codec, len(codecs))
	for _, c := range codecs {
		free <- c
	}
	return func(ctx context.Context, src []byte, p fz.Params) ([]byte, fz.Stats, error) {
		var c Codec
		select {
		case c = <-free:
		case <-ctx.Done():
			return nil, fz.Stats{}, context.Cause(ctx)
		}
		defer func() { free <- c }()
		return c(ctx, src, p)
	}
}
