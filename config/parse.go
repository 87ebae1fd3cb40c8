package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// ParseSize accepts plain byte counts and K/M/G/T with optional "i"/"B"
// suffixes (powers of 1024 either way, as memory sizes usually are).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(u, "B")
	u = strings.TrimSuffix(u, "I")
	if len(u) > 0 {
		if i := strings.IndexByte("KMGT", u[len(u)-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			u = u[:len(u)-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: expected a positive number of bytes, e.g. 4GiB, 512MiB or 1048576", s)
	}
	return int64(v * float64(mult)), nil
}

// The parsers below return only what was expected; the caller adds where
// the value came from and the key.
type parser func(s *Settings, v string) error

func str(f func(*Settings) *string) parser {
	return func(s *Settings, v string) error { *f(s) = v; return nil }
}

func nonEmpty(f func(*Settings) *string, what string) parser {
	return func(s *Settings, v string) error {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("expected %s", what)
		}
		*f(s) = v
		return nil
	}
}

func oneOf(f func(*Settings) *string, choices ...string) parser {
	return func(s *Settings, v string) error {
		l := strings.ToLower(strings.TrimSpace(v))
		for _, c := range choices {
			if l == c {
				*f(s) = l
				return nil
			}
		}
		return fmt.Errorf("expected %s or %s", strings.Join(choices[:len(choices)-1], ", "), choices[len(choices)-1])
	}
}

func size(f func(*Settings) *int64) parser {
	return func(s *Settings, v string) error {
		n, err := ParseSize(v)
		if err != nil {
			return fmt.Errorf("expected a positive size such as 4GiB, 512MiB or 1048576")
		}
		*f(s) = n
		return nil
	}
}

func sizeOrAuto(f func(*Settings) *int64) parser {
	return func(s *Settings, v string) error {
		if strings.EqualFold(strings.TrimSpace(v), "auto") {
			*f(s) = 0
			return nil
		}
		n, err := ParseSize(v)
		if err != nil || n < 1<<20 {
			return fmt.Errorf("expected auto or a size of at least 1MiB such as 8GiB")
		}
		*f(s) = n
		return nil
	}
}

func duration(f func(*Settings) *time.Duration) parser {
	return func(s *Settings, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return fmt.Errorf("expected a positive duration such as 30s, 5m or 1h")
		}
		*f(s) = d
		return nil
	}
}

func intIn(f func(*Settings) *int, lo, hi int, what string) parser {
	return func(s *Settings, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("expected %s (a whole number from %d to %d)", what, lo, hi)
		}
		*f(s) = n
		return nil
	}
}

// autoOrIntIn is intIn where "auto" (or 0) leaves the choice to the
// program (stored as 0).
func autoOrIntIn(f func(*Settings) *int, lo, hi int, what string) parser {
	p := intIn(f, lo, hi, what)
	return func(s *Settings, v string) error {
		if t := strings.TrimSpace(v); t == "auto" || t == "0" {
			*f(s) = 0
			return nil
		}
		if err := p(s, v); err != nil {
			return fmt.Errorf("expected auto or %s (a whole number from %d to %d)", what, lo, hi)
		}
		return nil
	}
}

func int64In(f func(*Settings) *int64, lo, hi int64, what string) parser {
	return func(s *Settings, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("expected %s (a whole number from %d to %d)", what, lo, hi)
		}
		*f(s) = n
		return nil
	}
}

func hostPort(f func(*Settings) *string, allowOff bool) parser {
	return func(s *Settings, v string) error {
		v = strings.TrimSpace(v)
		if allowOff && (v == "off" || v == "") {
			*f(s) = "off"
			return nil
		}
		host, port, err := net.SplitHostPort(v)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || p < 0 || p > 65535 {
			if allowOff {
				return fmt.Errorf("expected host:port such as 127.0.0.1:9464 (port 0 picks a free one), or off")
			}
			return fmt.Errorf("expected host:port such as 127.0.0.1:4222 (port 0 picks a free one)")
		}
		_ = host
		*f(s) = v
		return nil
	}
}

func token(f func(*Settings) *string) parser {
	return func(s *Settings, v string) error {
		if len(v) < 1 || len(v) > 128 || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			return fmt.Errorf("expected 1-128 characters of A-Z a-z 0-9 _ -")
		}
		*f(s) = v
		return nil
	}
}

// gpuList accepts "0", "0,1,3" or "all" (-1 stands for every device).
func gpuList(s *Settings, v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		s.GPUs = nil
		return nil
	}
	if strings.EqualFold(v, "all") {
		s.GPUs = []int{-1}
		return nil
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 255 || seen[n] {
			return fmt.Errorf("expected device numbers separated by commas, e.g. 0,1, or all")
		}
		seen[n] = true
		out = append(out, n)
	}
	s.GPUs = out
	return nil
}

// FormatVersions says which container versions a writer may be asked for,
// for messages: the codec writes version 1 (the default) or 2.
const FormatVersions = "1 (the default) or 2"

// ParseFormatVersion parses a container format version to write: 1 or 2
// (docs/FORMAT.md). The CLI's --format-version and serve's format_version
// share it, so both accept and refuse the same values.
func ParseFormatVersion(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 2 {
		return 0, fmt.Errorf("expected a container format version: %s", FormatVersions)
	}
	return n, nil
}

func formatVersion(f func(*Settings) *int) parser {
	return func(s *Settings, v string) error {
		n, err := ParseFormatVersion(v)
		if err != nil {
			return err
		}
		*f(s) = n
		return nil
	}
}

// Tilings says which tilings a writer may be asked for, for messages (as
// fz.Tilings).
const Tilings = "boxes (the default), flat, auto or padded"

// ParseTiling parses a tile geometry to write: boxes, flat, auto or padded
// (docs/FORMAT.md §3, §3.1, §3.2), case-insensitive, as fz.ParseTiling. The
// CLI's --tiling and serve's tiling share it.
func ParseTiling(v string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(v)); l {
	case "boxes", "flat", "auto", "padded":
		return l, nil
	}
	return "", fmt.Errorf("expected a tiling: %s", Tilings)
}

func tiling(f func(*Settings) *string) parser {
	return func(s *Settings, v string) error {
		t, err := ParseTiling(v)
		if err != nil {
			return err
		}
		*f(s) = t
		return nil
	}
}
