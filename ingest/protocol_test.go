package ingest

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

func validNotice() map[string]any {
	return map[string]any{
		"v": 1, "msg_id": "p1-0001", "producer": "p1", "run": "r1", "var": "temp", "step": 7,
		"dtype": "f32", "dims": []uint64{4, 5, 6}, "mode": "rel", "bound": 1e-3,
		"segment": "p1-x.seg", "offset": 0, "length": 4 * 5 * 6 * 4,
	}
}

func encode(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeValid(t *testing.T) {
	m := validNotice()
	m["fill"] = "nan"
	n, p, rt, err := DecodeNotification(encode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if rt.Producer != "p1" || rt.MsgID != "p1-0001" || n.Step != 7 {
		t.Fatalf("route %+v notice %+v", rt, n)
	}
	if p.DType != fz.Float32 || p.Mode != fz.Rel || p.Bound != 1e-3 || len(p.Dims) != 3 || p.Fill == nil || !math.IsNaN(*p.Fill) {
		t.Fatalf("params %+v", p)
	}
	// Round trip through the producer's encoder.
	b, err := json.Marshal(&n)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := DecodeNotification(b); err != nil {
		t.Fatalf("re-decode: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name string
		mut  func(m map[string]any)
		raw  string
		code Code
		want string
	}{
		{name: "not json", raw: `{"v":1, "msg_id": "a-1", "producer": "p"`, code: CodeMalformed},
		{name: "wrong type", raw: `{"v":1,"msg_id":"a-1","producer":"p","step":"seven"}`, code: CodeMalformed},
		{name: "trailing", raw: `{"v":1} {"v":1}`, code: CodeMalformed},
		{name: "version", mut: func(m map[string]any) { m["v"] = 2 }, code: CodeVersion},
		{name: "no version", mut: func(m map[string]any) { delete(m, "v") }, code: CodeInvalid, want: `"v"`},
		{name: "no step", mut: func(m map[string]any) { delete(m, "step") }, code: CodeInvalid, want: "step"},
		{name: "negative step", mut: func(m map[string]any) { m["step"] = -1 }, code: CodeMalformed},
		{name: "dtype", mut: func(m map[string]any) { m["dtype"] = "i16" }, code: CodeInvalid, want: "f32 or f64"},
		{name: "mode", mut: func(m map[string]any) { m["mode"] = "psnr" }, code: CodeInvalid, want: "abs or rel"},
		{name: "bound", mut: func(m map[string]any) { m["bound"] = 0 }, code: CodeInvalid, want: "bound"},
		{name: "no dims", mut: func(m map[string]any) { delete(m, "dims") }, code: CodeInvalid, want: "dims"},
		{name: "too many dims", mut: func(m map[string]any) { m["dims"] = make([]uint64, 17) }, code: CodeInvalid},
		{name: "dims overflow", mut: func(m map[string]any) { m["dims"] = []uint64{1 << 40, 1 << 40} }, code: CodeInvalid},
		{name: "size lie", mut: func(m map[string]any) { m["length"] = 4 * 5 * 6 * 4 * 2 }, code: CodeSizeMismatch, want: "need 480 bytes"},
		{name: "negative length", mut: func(m map[string]any) { m["length"] = -5 }, code: CodeInvalid},
		{name: "offset overflow", mut: func(m map[string]any) { m["offset"] = int64(math.MaxInt64 - 100) }, code: CodeInvalid, want: "overflows"},
		{name: "unaligned offset", mut: func(m map[string]any) { m["offset"] = 2 }, code: CodeInvalid, want: "multiple"},
		{name: "run with slash", mut: func(m map[string]any) { m["run"] = "../etc" }, code: CodeInvalid, want: "run"},
		{name: "var dot", mut: func(m map[string]any) { m["var"] = ".." }, code: CodeInvalid, want: "var"},
		{name: "producer with dot", mut: func(m map[string]any) { m["producer"] = "a.b" }, code: CodeInvalid, want: "producer"},
		{name: "msg id wildcard", mut: func(m map[string]any) { m["msg_id"] = "a>" }, code: CodeInvalid, want: "msg_id"},
		{name: "no segment", mut: func(m map[string]any) { delete(m, "segment") }, code: CodeInvalid, want: "segment"},
		{name: "f32 fill", mut: func(m map[string]any) { m["fill"] = 1e39 }, code: CodeInvalid, want: "float32"},
		{name: "fill word", mut: func(m map[string]any) { m["fill"] = "lots" }, code: CodeMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var data []byte
			if c.raw != "" {
				data = []byte(c.raw)
			} else {
				m := validNotice()
				c.mut(m)
				data = encode(t, m)
			}
			_, _, _, err := DecodeNotification(data)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error with code %s", err, c.code)
			}
			if e.Code != c.code || !strings.Contains(e.Message, c.want) {
				t.Fatalf("got %s %q, want code %s mentioning %q", e.Code, e.Message, c.code, c.want)
			}
		})
	}
}

func TestDecodeRescuesRoute(t *testing.T) {
	_, _, rt, err := DecodeNotification([]byte(`{"v":1,"msg_id":"m-1","producer":"p9","dims":"bad"}`))
	if err == nil || rt.Producer != "p9" || rt.MsgID != "m-1" {
		t.Fatalf("route %+v err %v", rt, err)
	}
	// Hostile route tokens are dropped, not used in subjects.
	_, _, rt, _ = DecodeNotification([]byte(`{"v":1,"msg_id":"m.>","producer":"p *"}`))
	if rt.Producer != "" || rt.MsgID != "" {
		t.Fatalf("unsafe route kept: %+v", rt)
	}
	big := make([]byte, MaxNotificationBytes+1)
	if _, _, _, err := DecodeNotification(big); !errors.Is(err, &Error{Code: CodeMalformed}) {
		t.Fatalf("oversized: %v", err)
	}
}

func TestErrorsIs(t *testing.T) {
	err := error(&Error{Code: CodeBudgetFull, Message: "full"})
	if !errors.Is(err, ErrBudgetFull) || errors.Is(err, ErrTooLarge) {
		t.Fatal("errors.Is by code")
	}
	if AsError(errors.New("x")).Code != CodeInternal {
		t.Fatal("untyped errors must become internal")
	}
}
