package sinks

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// StepDigits is the zero-padded width of a step in object names, so that
// lexical order (what S3 and ls return) is step order. Steps up to MaxStep fit.
const StepDigits = 12

// MaxStep is the largest storable step.
const MaxStep = uint64(999_999_999_999)

// MaxNameLen bounds run and variable names.
const MaxNameLen = 128

// blobExt is the suffix of stored blobs.
const blobExt = ".fz"

func stepName(step uint64) string { return fmt.Sprintf("%0*d", StepDigits, step) }

// ValidateName checks a run or variable name: 1–128 characters of
// [A-Za-z0-9._-], starting with a letter or digit. That keeps names safe as
// one path segment on disk and in S3 (no "/", no "..", no dotfiles that would
// collide with the sink's own temp and lock files, no odd characters that
// shells or URLs mangle).
func ValidateName(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s name: expected 1-%d characters of A-Z a-z 0-9 . _ -", what, MaxNameLen)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s name %.40q… is %d bytes long: at most %d allowed", what, s, len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%s name %q must start with a letter or digit", what, s)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%s name %q has character %q at byte %d: only A-Z a-z 0-9 . _ - are allowed", what, s, c, i)
		}
	}
	return nil
}

// Validate checks k's names and step range.
func (k Key) Validate() error {
	if err := ValidateName("run", k.Run); err != nil {
		return err
	}
	if err := ValidateName("variable", k.Var); err != nil {
		return err
	}
	if k.Step > MaxStep {
		return fmt.Errorf("step %d is above the largest storable step %d", k.Step, MaxStep)
	}
	return nil
}

func (f Filter) validate() error {
	if f.Run == "" && f.Var != "" {
		return fmt.Errorf("filter names variable %q but no run: give the run too", f.Var)
	}
	if f.Run != "" {
		if err := ValidateName("run", f.Run); err != nil {
			return err
		}
	}
	if f.Var != "" {
		return ValidateName("variable", f.Var)
	}
	return nil
}

// relPath is the object path of k below the sink's prefix.
func (k Key) relPath() string { return k.Run + "/" + k.Var + "/" + stepName(k.Step) + blobExt }

// parseRel parses "<run>/<var>/<step>.fz". ok is false for anything else
// (temp files, sidecars, foreign objects), which listings skip.
func parseRel(rel string) (Key, bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 || !strings.HasSuffix(parts[2], blobExt) {
		return Key{}, false
	}
	digits := strings.TrimSuffix(parts[2], blobExt)
	if len(digits) != StepDigits {
		return Key{}, false
	}
	step, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return Key{}, false
	}
	k := Key{Run: parts[0], Var: parts[1], Step: step}
	if k.Validate() != nil {
		return Key{}, false
	}
	return k, true
}

// ParseStep parses a step given by a user: a decimal number (padding
// allowed) or "latest", in which case latest is true.
func ParseStep(s string) (step uint64, latest bool, err error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "latest") {
		return 0, true, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > MaxStep {
		return 0, false, fmt.Errorf("step %q: expected a number from 0 to %d, or latest", s, MaxStep)
	}
	return v, false, nil
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i].Key, es[j].Key
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		if a.Var != b.Var {
			return a.Var < b.Var
		}
		return a.Step < b.Step
	})
}

// notFound builds the error for a missing key: it lists the catalog to find
// the first missing level and what exists there.
func notFound(ctx context.Context, s Sink, k Key) error {
	all, err := s.List(ctx, Filter{Run: k.Run})
	if err != nil {
		return fmt.Errorf("%s not found in %s (listing what exists failed: %v): %w", k, s, err, ErrNotFound)
	}
	if len(all) == 0 {
		runs, err := s.List(ctx, Filter{})
		if err != nil {
			return fmt.Errorf("run %q not found in %s: %w", k.Run, s, ErrNotFound)
		}
		return &NotFoundError{Sink: s.String(), Level: "run", Name: k.Run, Have: uniq(runs, func(e Entry) string { return e.Key.Run })}
	}
	var steps []Entry
	for _, e := range all {
		if e.Key.Var == k.Var {
			steps = append(steps, e)
		}
	}
	if len(steps) == 0 {
		return &NotFoundError{Sink: s.String(), Level: "variable", Name: k.Var, Under: k.Run, Have: uniq(all, func(e Entry) string { return e.Key.Var })}
	}
	return &NotFoundError{Sink: s.String(), Level: "step", Name: strconv.FormatUint(k.Step, 10), Under: k.Run + "/" + k.Var,
		Have: uniq(steps, func(e Entry) string { return strconv.FormatUint(e.Key.Step, 10) })}
}

// uniq maps sorted entries to names, dropping repeats but keeping order.
func uniq(es []Entry, name func(Entry) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range es {
		n := name(e)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Latest returns the newest step stored for run/var; with var == "" the
// newest step that any variable of the run has.
func Latest(ctx context.Context, s Sink, run, variable string) (uint64, error) {
	es, err := s.List(ctx, Filter{Run: run, Var: variable})
	if err != nil {
		return 0, err
	}
	if len(es) == 0 {
		probe := Key{Run: run, Var: variable}
		if variable == "" {
			// Any valid name works: only the run level is looked at.
			probe.Var = "x"
		}
		return 0, notFound(ctx, s, probe)
	}
	var best uint64
	for _, e := range es {
		best = max(best, e.Key.Step)
	}
	return best, nil
}

// StepEntries returns the entries of every variable of run at step, or a
// *NotFoundError listing the run's steps.
func StepEntries(ctx context.Context, s Sink, run string, step uint64) ([]Entry, error) {
	es, err := s.List(ctx, Filter{Run: run})
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, notFound(ctx, s, Key{Run: run, Var: "x", Step: step})
	}
	var out []Entry
	var steps []uint64
	seen := map[uint64]bool{}
	for _, e := range es {
		if e.Key.Step == step {
			out = append(out, e)
		}
		if !seen[e.Key.Step] {
			seen[e.Key.Step] = true
			steps = append(steps, e.Key.Step)
		}
	}
	if len(out) == 0 {
		sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
		have := make([]string, len(steps))
		for i, st := range steps {
			have[i] = strconv.FormatUint(st, 10)
		}
		return nil, &NotFoundError{Sink: s.String(), Level: "step", Name: strconv.FormatUint(step, 10), Under: run, Have: have}
	}
	return out, nil
}
