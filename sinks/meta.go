package sinks

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxMetaDims matches fz.MaxDims without importing the codec.
const maxMetaDims = 16

// maxSidecarBytes bounds a sidecar JSON file read from disk.
const maxSidecarBytes = 64 << 10

func (m Meta) validate() error {
	for _, f := range []struct {
		name string
		v    string
	}{{"dtype", m.DType}, {"mode", m.Mode}} {
		if len(f.v) > 16 || !isToken(f.v) {
			return fmt.Errorf("meta %s %q: expected a short lowercase token such as f32 or rel", f.name, f.v)
		}
	}
	if len(m.Dims) > maxMetaDims {
		return fmt.Errorf("meta has %d dims: at most %d allowed", len(m.Dims), maxMetaDims)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"bound", m.Bound}, {"abs_eb", m.AbsEB}, {"max_abs_err", m.MaxAbsErr}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("meta %s %v: expected a finite number >= 0", f.name, f.v)
		}
	}
	if len(m.Extra) > 256 {
		return fmt.Errorf("meta extra is %d bytes: at most 256 allowed", len(m.Extra))
	}
	for i := 0; i < len(m.Extra); i++ {
		if c := m.Extra[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("meta extra has byte %#x at %d: only printable ASCII is allowed (it travels in an HTTP header)", c, i)
		}
	}
	return nil
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// User-metadata keys on S3 (sent as x-amz-meta-fz-…). One key per field
// keeps them readable with any S3 tool.
const (
	mdDType     = "fz-dtype"
	mdDims      = "fz-dims"
	mdMode      = "fz-mode"
	mdBound     = "fz-bound"
	mdAbsEB     = "fz-abs-eb"
	mdMaxAbsErr = "fz-max-abs-err"
	mdRawBytes  = "fz-raw-bytes"
	mdStored    = "fz-stored-bytes"
	mdCRC32C    = "fz-crc32c"
	mdCreated   = "fz-created"
	mdExtra     = "fz-extra"
)

func (m Meta) userMetadata() map[string]string {
	md := map[string]string{
		mdStored:  strconv.FormatUint(m.Stored, 10),
		mdCRC32C:  fmt.Sprintf("%08x", m.CRC32C),
		mdCreated: m.Created.UTC().Format(time.RFC3339Nano),
	}
	set := func(k, v string) {
		if v != "" {
			md[k] = v
		}
	}
	set(mdDType, m.DType)
	set(mdMode, m.Mode)
	if len(m.Dims) > 0 {
		ds := make([]string, len(m.Dims))
		for i, d := range m.Dims {
			ds[i] = strconv.FormatUint(d, 10)
		}
		md[mdDims] = strings.Join(ds, "x")
	}
	f := func(k string, v float64) {
		if v != 0 {
			md[k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	f(mdBound, m.Bound)
	f(mdAbsEB, m.AbsEB)
	f(mdMaxAbsErr, m.MaxAbsErr)
	if m.RawBytes != 0 {
		md[mdRawBytes] = strconv.FormatUint(m.RawBytes, 10)
	}
	set(mdExtra, m.Extra)
	return md
}

// metaFromUser parses user metadata as S3 returns it (key case varies by
// server and client: "Fz-Dtype", "fz-dtype", "X-Amz-Meta-Fz-Dtype"). The
// values are untrusted.
func metaFromUser(raw map[string]string) (Meta, error) {
	md := make(map[string]string, len(raw))
	for k, v := range raw {
		k = strings.ToLower(k)
		k = strings.TrimPrefix(k, "x-amz-meta-")
		md[k] = v
	}
	var m Meta
	if _, ok := md[mdCRC32C]; !ok {
		return m, fmt.Errorf("no %s metadata: not stored by fzsidecar", mdCRC32C)
	}
	var err error
	pu := func(k string) uint64 {
		v, ok := md[k]
		if !ok || err != nil {
			return 0
		}
		var x uint64
		if x, err = strconv.ParseUint(v, 10, 64); err != nil {
			err = fmt.Errorf("metadata %s=%q: %w", k, v, err)
		}
		return x
	}
	pf := func(k string) float64 {
		v, ok := md[k]
		if !ok || err != nil {
			return 0
		}
		var x float64
		if x, err = strconv.ParseFloat(v, 64); err != nil {
			err = fmt.Errorf("metadata %s=%q: %w", k, v, err)
		}
		return x
	}
	m.DType = md[mdDType]
	m.Mode = md[mdMode]
	m.Extra = md[mdExtra]
	m.Bound = pf(mdBound)
	m.AbsEB = pf(mdAbsEB)
	m.MaxAbsErr = pf(mdMaxAbsErr)
	m.RawBytes = pu(mdRawBytes)
	m.Stored = pu(mdStored)
	if err != nil {
		return m, err
	}
	crc, perr := strconv.ParseUint(md[mdCRC32C], 16, 32)
	if perr != nil {
		return m, fmt.Errorf("metadata %s=%q: expected 8 hex digits", mdCRC32C, md[mdCRC32C])
	}
	m.CRC32C = uint32(crc)
	if d := md[mdDims]; d != "" {
		parts := strings.Split(d, "x")
		if len(parts) > maxMetaDims {
			return m, fmt.Errorf("metadata %s=%q: more than %d dims", mdDims, d, maxMetaDims)
		}
		for _, p := range parts {
			v, perr := strconv.ParseUint(p, 10, 64)
			if perr != nil {
				return m, fmt.Errorf("metadata %s=%q: %w", mdDims, d, perr)
			}
			m.Dims = append(m.Dims, v)
		}
	}
	if c := md[mdCreated]; c != "" {
		t, perr := time.Parse(time.RFC3339Nano, c)
		if perr != nil {
			return m, fmt.Errorf("metadata %s=%q: %w", mdCreated, c, perr)
		}
		m.Created = t
	}
	return m, m.validate()
}

// sidecar is the JSON file stored next to each blob on disk.
type sidecar struct {
	Format int  `json:"format"` // 1
	Meta   Meta `json:"meta"`
}

func encodeSidecar(m Meta) ([]byte, error) {
	b, err := json.MarshalIndent(sidecar{Format: 1, Meta: m}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func decodeSidecar(b []byte) (Meta, error) {
	var s sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		return Meta{}, err
	}
	if s.Format != 1 {
		return Meta{}, fmt.Errorf("sidecar format %d: this build reads format 1", s.Format)
	}
	return s.Meta, s.Meta.validate()
}

// prepare checks m against blob and fills the fields the sink owns.
func prepare(k Key, blob []byte, m Meta) (Meta, error) {
	if err := k.Validate(); err != nil {
		return m, invalid(err)
	}
	if err := m.validate(); err != nil {
		return m, invalid(fmt.Errorf("%s: %w", k, err))
	}
	crc := CRC32C(blob)
	if m.CRC32C != 0 && m.CRC32C != crc {
		return m, fmt.Errorf("%s: blob crc32c is %08x but the caller's meta says %08x: blob changed after it was made: %w", k, crc, m.CRC32C, ErrChecksum)
	}
	if m.Stored != 0 && m.Stored != uint64(len(blob)) {
		return m, fmt.Errorf("%s: blob is %d bytes but the caller's meta says %d", k, len(blob), m.Stored)
	}
	m.CRC32C = crc
	m.Stored = uint64(len(blob))
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	return m, nil
}
