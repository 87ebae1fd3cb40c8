package fz

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// JSONFloat is a float64 that JSON can always carry. Fill values are often
// NaN or an infinity, which JSON numbers cannot be: those travel as the
// strings "nan", "inf" and "-inf" (read case-insensitively, "+inf" too),
// every other value as a JSON number. It is the form of fill values and
// statistics in the ingest protocol (docs/PROTOCOL.md) and in restore.json.
type JSONFloat float64

func (f JSONFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"nan"`), nil
	case math.IsInf(v, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *JSONFloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch strings.ToLower(s) {
		case "nan":
			*f = JSONFloat(math.NaN())
		case "inf", "+inf":
			*f = JSONFloat(math.Inf(1))
		case "-inf":
			*f = JSONFloat(math.Inf(-1))
		default:
			return fmt.Errorf("%q is not a number: expected a JSON number or \"nan\", \"inf\", \"-inf\"", s)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = JSONFloat(v)
	return nil
}
