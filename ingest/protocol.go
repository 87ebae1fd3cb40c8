package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/fzsidecar/fzsidecar/fz"
)

// ProtocolVersion is the "v" field of every message. A sidecar rejects
// versions it does not know rather than guessing at their meaning.
const ProtocolVersion = 1

// DefaultPrefix is the first token of every subject and, upper-cased, of the
// stream names.
const DefaultPrefix = "fz"

// DefaultShmDir is where producers create segments unless configured.
const DefaultShmDir = "/dev/shm/fzsidecar"

// MaxNotificationBytes caps a notification; the stream refuses larger ones,
// so a hostile producer cannot make the sidecar parse megabytes of JSON.
const MaxNotificationBytes = 64 << 10

var (
	// tokenRe is what may appear inside a NATS subject token: ids are used
	// as tokens, so they must not contain '.', '*', '>' or spaces.
	tokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// nameRe is safe both as a subject-free label and as a path component in
	// a sink: no leading dot (so never "." or ".."), no separators.
	nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidToken reports whether s can be used as a producer id, message id or
// subject prefix.
func ValidToken(s string) bool { return tokenRe.MatchString(s) }

// Subjects derives every NATS name from one prefix, so several independent
// sidecars can share a server by using different prefixes.
type Subjects struct{ Prefix string }

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// Snapshot is the subject a producer publishes notifications on.
func (s Subjects) Snapshot(producer string) string { return s.prefix() + ".snap." + producer }

// SnapshotWildcard is what the snapshot stream captures.
func (s Subjects) SnapshotWildcard() string { return s.prefix() + ".snap.>" }

// Result is where the sidecar publishes the outcome of one snapshot.
func (s Subjects) Result(producer, msgID string) string {
	return s.prefix() + ".result." + producer + "." + msgID
}

// ResultWildcard is what the result stream captures.
func (s Subjects) ResultWildcard() string { return s.prefix() + ".result.>" }

// ProducerResults are all results addressed to one producer.
func (s Subjects) ProducerResults(producer string) string {
	return s.prefix() + ".result." + producer + ".*"
}

// Admit is the request/reply subject for budget admission.
func (s Subjects) Admit() string { return s.prefix() + ".admit" }

// Status answers a Status request with the sidecar's current load.
func (s Subjects) Status() string { return s.prefix() + ".status" }

// Release gives back an admission that will not be published.
func (s Subjects) Release() string { return s.prefix() + ".release" }

// SnapshotStream and ResultStream are the JetStream stream names.
func (s Subjects) SnapshotStream() string {
	return strings.ToUpper(strings.ReplaceAll(s.prefix(), "-", "_")) + "_SNAPSHOTS"
}
func (s Subjects) ResultStream() string {
	return strings.ToUpper(strings.ReplaceAll(s.prefix(), "-", "_")) + "_RESULTS"
}

// Consumer is the durable consumer name the sidecar reads snapshots with.
func (s Subjects) Consumer() string { return "fzsidecar" }

// Float is a float64 that also travels as the JSON strings "nan", "inf" and
// "-inf", since fill values are often NaN and JSON numbers cannot be.
type Float = fz.JSONFloat

// Notification announces one snapshot lying in a shared-memory segment.
type Notification struct {
	Version  int      `json:"v"`
	MsgID    string   `json:"msg_id"`
	Producer string   `json:"producer"`
	Run      string   `json:"run"`
	Var      string   `json:"var"`
	Step     uint64   `json:"step"`
	DType    string   `json:"dtype"`
	Dims     []uint64 `json:"dims"`
	Mode     string   `json:"mode"`
	Bound    float64  `json:"bound"`
	Fill     *Float   `json:"fill,omitempty"`
	Segment  string   `json:"segment,omitempty"`
	Offset   int64    `json:"offset"`
	Length   int64    `json:"length"`
	// Device, instead of Segment, names the bytes in a producer's GPU
	// memory (device.go; only to a sidecar advertising FeatureCUDAIPC).
	Device *DeviceRef `json:"device,omitempty"`
}

// wireNotification has pointers where a zero value is legal, so a missing
// field can be told apart from a zero one.
type wireNotification struct {
	Version  *int       `json:"v"`
	MsgID    string     `json:"msg_id"`
	Producer string     `json:"producer"`
	Run      string     `json:"run"`
	Var      string     `json:"var"`
	Step     *uint64    `json:"step"`
	DType    string     `json:"dtype"`
	Dims     []uint64   `json:"dims"`
	Mode     string     `json:"mode"`
	Bound    *float64   `json:"bound"`
	Fill     *Float     `json:"fill"`
	Segment  string     `json:"segment"`
	Offset   *int64     `json:"offset"`
	Length   *int64     `json:"length"`
	Device   *DeviceRef `json:"device"`
}

// Route is what is needed to answer a message even when the rest is bad.
type Route struct{ Producer, MsgID string }

// DecodeNotification parses and fully validates a notification (everything
// except the segment file itself). On error it still returns whatever route
// it could recover, so the producer can be told what was wrong.
func DecodeNotification(data []byte) (Notification, fz.Params, Route, error) {
	var w wireNotification
	var rt Route
	if len(data) > MaxNotificationBytes {
		return Notification{}, fz.Params{}, rt, errorf(CodeMalformed, "notification is %d bytes: at most %d are accepted", len(data), MaxNotificationBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		// Try to rescue the route so the error reaches its producer.
		var r struct {
			MsgID    any `json:"msg_id"`
			Producer any `json:"producer"`
		}
		if json.Unmarshal(data, &r) == nil {
			rt.MsgID, _ = r.MsgID.(string)
			rt.Producer, _ = r.Producer.(string)
		}
		rt = cleanRoute(rt)
		return Notification{}, fz.Params{}, rt, errorf(CodeMalformed, "notification is not valid JSON of the expected shape: %v", err)
	}
	if dec.More() {
		return Notification{}, fz.Params{}, cleanRoute(Route{w.Producer, w.MsgID}), errorf(CodeMalformed, "trailing data after the JSON object")
	}
	rt = cleanRoute(Route{w.Producer, w.MsgID})
	if w.Version == nil {
		return Notification{}, fz.Params{}, rt, errorf(CodeInvalid, "missing field \"v\": expected protocol version %d", ProtocolVersion)
	}
	if *w.Version != ProtocolVersion {
		return Notification{}, fz.Params{}, rt, errorf(CodeVersion, "protocol version %d: this sidecar speaks version %d", *w.Version, ProtocolVersion)
	}
	n := Notification{
		Version: *w.Version, MsgID: w.MsgID, Producer: w.Producer, Run: w.Run, Var: w.Var,
		DType: w.DType, Dims: w.Dims, Mode: w.Mode, Fill: w.Fill, Segment: w.Segment, Device: w.Device,
	}
	missing := func(f, want string) error {
		return errorf(CodeInvalid, "missing field %q: expected %s", f, want)
	}
	switch {
	case w.Step == nil:
		return n, fz.Params{}, rt, missing("step", "a non-negative integer")
	case w.Bound == nil:
		return n, fz.Params{}, rt, missing("bound", "a number > 0")
	case w.Offset == nil:
		return n, fz.Params{}, rt, missing("offset", "a byte offset >= 0")
	case w.Length == nil:
		return n, fz.Params{}, rt, missing("length", "a byte length >= 0")
	}
	n.Step, n.Bound, n.Offset, n.Length = *w.Step, *w.Bound, *w.Offset, *w.Length
	p, err := n.Validate()
	return n, p, rt, err
}

func cleanRoute(r Route) Route {
	if !ValidToken(r.Producer) {
		r.Producer = ""
	}
	if !ValidToken(r.MsgID) {
		r.MsgID = ""
	}
	return r
}

// Validate checks every field except the segment file and returns the codec
// parameters. Messages are untrusted; this runs before anything is mapped.
func (n *Notification) Validate() (fz.Params, error) {
	bad := func(format string, a ...any) (fz.Params, error) {
		return fz.Params{}, errorf(CodeInvalid, format, a...)
	}
	if n.Version != ProtocolVersion {
		return fz.Params{}, errorf(CodeVersion, "protocol version %d: this sidecar speaks version %d", n.Version, ProtocolVersion)
	}
	if !ValidToken(n.MsgID) {
		return bad("msg_id %q: expected 1-128 characters of A-Z a-z 0-9 _ -", n.MsgID)
	}
	if !ValidToken(n.Producer) {
		return bad("producer %q: expected 1-128 characters of A-Z a-z 0-9 _ -", n.Producer)
	}
	if !nameRe.MatchString(n.Run) {
		return bad("run %q: expected 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", n.Run)
	}
	if !nameRe.MatchString(n.Var) {
		return bad("var %q: expected 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", n.Var)
	}
	dt, err := fz.ParseDType(n.DType)
	if err != nil {
		return bad("%v", err)
	}
	mode, err := fz.ParseMode(n.Mode)
	if err != nil {
		return bad("%v", err)
	}
	if len(n.Dims) == 0 {
		return bad("missing field \"dims\": expected a list of extents, slowest to fastest, e.g. [100,500,500]")
	}
	p := fz.Params{DType: dt, Dims: append([]uint64(nil), n.Dims...), Mode: mode, Bound: n.Bound}
	if n.Fill != nil {
		f := float64(*n.Fill)
		p.Fill = &f
	}
	switch {
	case n.Segment == "" && n.Device == nil:
		return bad("missing field \"segment\": expected a file name inside the shm directory (or \"device\" for GPU memory)")
	case n.Segment != "" && n.Device != nil:
		return bad("both \"segment\" and \"device\": a snapshot lies either in a segment or in GPU memory")
	}
	if n.Offset < 0 || n.Length < 0 {
		return bad("offset %d / length %d: expected non-negative byte counts", n.Offset, n.Length)
	}
	if n.Offset > math.MaxInt64-n.Length {
		return bad("offset %d + length %d overflows", n.Offset, n.Length)
	}
	if n.Offset%int64(dt.Size()) != 0 {
		return bad("offset %d is not a multiple of the %s element size %d", n.Offset, dt, dt.Size())
	}
	if n.Device != nil {
		if err := n.Device.validate(n.Offset, n.Length); err != nil {
			return fz.Params{}, err
		}
	}
	if err := p.Validate(-1); err != nil {
		return fz.Params{}, errorf(CodeInvalid, "%v", err)
	}
	elems, _ := fz.NumElements(p.Dims)
	if need := elems * uint64(dt.Size()); need != uint64(n.Length) {
		return fz.Params{}, errorf(CodeSizeMismatch, "length is %d bytes but dims %s of %s need %d bytes (%d elements × %d)",
			n.Length, fz.FormatDims(p.Dims), dt, need, elems, dt.Size())
	}
	return p, nil
}

// Result answers one snapshot, successful or not.
type Result struct {
	Version  int    `json:"v"`
	MsgID    string `json:"msg_id"`
	Producer string `json:"producer"`
	Run      string `json:"run,omitempty"`
	Var      string `json:"var,omitempty"`
	Step     uint64 `json:"step"`
	OK       bool   `json:"ok"`
	// Key is the object key in the sink.
	Key             string  `json:"key,omitempty"`
	RawBytes        uint64  `json:"raw_bytes,omitempty"`
	CompressedBytes uint64  `json:"compressed_bytes,omitempty"`
	Ratio           Float   `json:"ratio,omitempty"`
	AbsEB           Float   `json:"abs_eb,omitempty"`
	MaxAbsErr       Float   `json:"max_abs_err,omitempty"`
	Seconds         float64 `json:"seconds,omitempty"`
	// GPUSeconds is, for a GPU-resident snapshot (§4.1), the span of the
	// sidecar's device work on it: first kernel to last copy back.
	GPUSeconds float64 `json:"gpu_seconds,omitempty"`
	Error      *Error  `json:"error,omitempty"`
}

// Err returns the result's error as a Go error, or nil.
func (r *Result) Err() error {
	if r.OK {
		return nil
	}
	if r.Error == nil {
		return &Error{Code: CodeInternal, Message: "result without ok and without error"}
	}
	return r.Error
}

func (r *Result) String() string {
	if !r.OK {
		return fmt.Sprintf("%s/%s step %d: error %v", r.Run, r.Var, r.Step, r.Err())
	}
	return fmt.Sprintf("%s/%s step %d: key %s, %d -> %d bytes, ratio %.2f, max error %.3g (bound %.3g)",
		r.Run, r.Var, r.Step, r.Key, r.RawBytes, r.CompressedBytes, float64(r.Ratio), float64(r.MaxAbsErr), float64(r.AbsEB))
}

// AdmitRequest asks the sidecar for budget before a producer fills a segment.
type AdmitRequest struct {
	Version  int    `json:"v"`
	MsgID    string `json:"msg_id"`
	Producer string `json:"producer"`
	Bytes    int64  `json:"bytes"`
	// Policy is "block" (wait up to TimeoutMS for room) or "fail" (answer
	// budget_full at once).
	Policy    string `json:"policy"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	// Renew marks a lease renewal: it extends msg_id's admission if the
	// sidecar still holds it and never grants a new one, so a renewal the
	// sidecar reads late (after the snapshot was answered or released)
	// cannot leave a ghost hold on the budget.
	Renew bool `json:"renew,omitempty"`
}

// AdmitReply grants or refuses admission.
type AdmitReply struct {
	Version int  `json:"v"`
	Granted bool `json:"granted"`
	// LeaseMS is how long the grant stays reserved if no notification with
	// the same msg_id arrives.
	LeaseMS int64  `json:"lease_ms,omitempty"`
	Error   *Error `json:"error,omitempty"`
}

// Status is the reply on the status subject.
type Status struct {
	Version     int   `json:"v"`
	BudgetBytes int64 `json:"budget_bytes"`
	UsedBytes   int64 `json:"used_bytes"`
	Holds       int   `json:"holds"`
	InFlight    int   `json:"in_flight"`
	// Features lists optional protocol features this sidecar accepts
	// (FeatureCUDAIPC); absent means none.
	Features []string `json:"features,omitempty"`
}

// ReleaseRequest returns an unused grant.
type ReleaseRequest struct {
	Version int    `json:"v"`
	MsgID   string `json:"msg_id"`
}

// Policy decides what a producer does when the budget is full.
type Policy int

const (
	// Block waits (up to a timeout) for room, like ADIOS2 SST's Block policy.
	Block Policy = iota
	// Fail returns ErrBudgetFull at once (Damaris-style fail fast), so the
	// simulation can skip this output and carry on.
	Fail
)

func (p Policy) String() string {
	if p == Fail {
		return "fail"
	}
	return "block"
}

// ParsePolicy accepts block and fail.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "block":
		return Block, nil
	case "fail", "discard", "fail-fast":
		return Fail, nil
	}
	return 0, fmt.Errorf("unknown budget policy %q: expected block or fail", s)
}
