package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// SinkStore adapts a sinks.Sink (local disk or S3) to Store.
func SinkStore(s sinks.Sink) Store { return sinkStore{s} }

type sinkStore struct{ s sinks.Sink }

func sinkKey(k Key) sinks.Key { return sinks.Key{Run: k.Run, Var: k.Var, Step: k.Step} }

// Location is the object path below the sink's prefix, as sinks lay it out.
func (s sinkStore) Location(k Key) string { return sinkKey(k).String() + ".fz" }

func (s sinkStore) Put(ctx context.Context, k Key, blob []byte, m Meta) error {
	sk := sinkKey(k)
	if err := sk.Validate(); err != nil {
		return &ingest.Error{Code: ingest.CodeInvalid, Message: fmt.Sprintf("sink %s cannot store it: %v", s.s, err)}
	}
	meta := sinks.Meta{
		DType: m.Params.DType.String(), Dims: m.Params.Dims, Mode: m.Params.Mode.String(), Bound: m.Params.Bound,
		AbsEB: m.Stats.AbsEB, MaxAbsErr: m.Stats.MaxAbsErr, RawBytes: m.Stats.RawBytes,
		// Checked by the sink against the bytes it writes: catches corruption
		// between compressor and storage.
		CRC32C: sinks.CRC32C(blob),
		Extra:  "producer=" + m.Producer + " msg_id=" + m.MsgID,
	}
	if len(meta.Extra) > 256 {
		meta.Extra = meta.Extra[:256]
	}
	err := s.s.Put(ctx, sk, blob, meta)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sinks.ErrConflict):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	case !sinks.Retryable(err):
		// Permission denied, read-only, invalid metadata, S3 credentials:
		// another delivery cannot fix it, so the producer is told now.
		return Permanent(err)
	}
	return err
}

// Find looks k up in the sink (Finder). Producer and MsgID come from the
// note Put leaves in the object's metadata.
func (s sinkStore) Find(ctx context.Context, k Key) (Meta, bool, error) {
	sm, err := s.s.Stat(ctx, sinkKey(k))
	if errors.Is(err, sinks.ErrNotFound) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, err
	}
	m := Meta{Stats: fz.Stats{RawBytes: sm.RawBytes, CompressedBytes: sm.Stored, AbsEB: sm.AbsEB, MaxAbsErr: sm.MaxAbsErr},
		Timestamp: sm.Created}
	for _, f := range strings.Fields(sm.Extra) {
		if v, ok := strings.CutPrefix(f, "producer="); ok {
			m.Producer = v
		} else if v, ok := strings.CutPrefix(f, "msg_id="); ok {
			m.MsgID = v
		}
	}
	return m, true, nil
}
