package fz

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestJSONFloatRoundTrip(t *testing.T) {
	for _, c := range []struct {
		v    float64
		json string
	}{{-1e34, "-1e+34"}, {0.1, "0.1"}, {0, "0"}, {math.NaN(), `"nan"`}, {math.Inf(1), `"inf"`}, {math.Inf(-1), `"-inf"`}} {
		b, err := json.Marshal(JSONFloat(c.v))
		if err != nil || string(b) != c.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.v, b, err, c.json)
		}
		var f JSONFloat
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if got := float64(f); got != c.v && !(math.IsNaN(got) && math.IsNaN(c.v)) {
			t.Errorf("Unmarshal(%s) = %v, want %v", b, got, c.v)
		}
	}
}

func TestJSONFloatReads(t *testing.T) {
	for in, want := range map[string]float64{`"NaN"`: math.NaN(), `"+inf"`: math.Inf(1), `"-INF"`: math.Inf(-1), `2.5`: 2.5} {
		var f JSONFloat
		if err := json.Unmarshal([]byte(in), &f); err != nil {
			t.Errorf("Unmarshal(%s): %v", in, err)
		} else if got := float64(f); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("Unmarshal(%s) = %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{`"x"`, `"infinity"`, `true`, `[1]`} {
		var f JSONFloat
		err := json.Unmarshal([]byte(in), &f)
		if err == nil {
			t.Errorf("Unmarshal(%s) accepted: %v", in, float64(f))
		} else if in == `"x"` && !strings.Contains(err.Error(), `expected a JSON number or "nan", "inf", "-inf"`) {
			t.Errorf("Unmarshal(%s): %v, want what is expected", in, err)
		}
	}
}
