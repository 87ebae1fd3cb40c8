package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fzsidecar/fzsidecar/sinks"
)

func init() {
	register(&command{name: "ls", summary: "list runs, variables and steps stored in a sink", run: runLs})
}

// lsRow is one step in --json output.
type lsRow struct {
	Run       string    `json:"run"`
	Var       string    `json:"var"`
	Step      uint64    `json:"step"`
	Bytes     uint64    `json:"bytes"`
	RawBytes  uint64    `json:"raw_bytes"`
	Ratio     float64   `json:"ratio"`
	DType     string    `json:"dtype,omitempty"`
	Dims      []uint64  `json:"dims,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	Bound     float64   `json:"bound"`
	AbsEB     float64   `json:"abs_eb"`
	MaxAbsErr float64   `json:"max_abs_err,omitempty"`
	CRC32C    string    `json:"crc32c"`
	Created   time.Time `json:"created"`
}

func runLs(ctx context.Context, args []string) error {
	fs := newFlags("ls", "ls [--sink URL | --config FILE] [--run R [--var V]] [--json]")
	var k keyFlags
	k.register(fs, true, false)
	asJSON := fs.Bool("json", false, "print every matching step as a JSON array")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		if len(pos) <= 2 && k.run == "" {
			hint := "--run " + pos[0]
			if len(pos) == 2 {
				hint += " --var " + pos[1]
			}
			return usageErr(fs, "unexpected arguments %q: ls takes the run and variable as flags: fzsidecar ls %s", pos, hint)
		}
		return usageErr(fs, "unexpected arguments %q", pos)
	}
	if k.v != "" && k.run == "" {
		return usageErr(fs, "--var needs --run")
	}
	s, err := k.openSink(ctx, fs, true)
	if err != nil {
		return err
	}
	defer s.Close()
	es, err := s.List(ctx, sinks.Filter{Run: k.run, Var: k.v})
	if err != nil {
		return err
	}
	if len(es) == 0 && k.run != "" {
		// Say what does exist instead of printing nothing.
		_, err := sinks.Latest(ctx, s, k.run, k.v)
		return err
	}
	if len(es) == 0 && !*asJSON {
		fmt.Fprintf(os.Stderr, "no runs stored in %s yet\n", s)
		return nil
	}
	if *asJSON {
		rows := make([]lsRow, 0, len(es))
		for _, e := range es {
			m := e.Meta
			rows = append(rows, lsRow{Run: e.Key.Run, Var: e.Key.Var, Step: e.Key.Step, Bytes: m.Stored, RawBytes: m.RawBytes,
				Ratio: m.Ratio(), DType: m.DType, Dims: m.Dims, Mode: m.Mode, Bound: m.Bound, AbsEB: m.AbsEB,
				MaxAbsErr: m.MaxAbsErr, CRC32C: fmt.Sprintf("%08x", m.CRC32C), Created: m.Created})
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch {
	case k.run == "":
		printGroups(tw, es, "RUN", true, func(e sinks.Entry) string { return e.Key.Run })
	case k.v == "":
		printGroups(tw, es, "VAR", false, func(e sinks.Entry) string { return e.Key.Var })
	default:
		fmt.Fprintln(tw, "STEP\tSIZE\tRAW\tRATIO\tDTYPE\tDIMS\tBOUND\tCRC32C\tCREATED")
		for _, e := range es {
			m := e.Meta
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%s\t%s\t%s %g\t%08x\t%s\n", e.Key.Step, humanBytes(m.Stored), humanBytes(m.RawBytes),
				m.Ratio(), m.DType, dimsString(m.Dims), m.Mode, m.Bound, m.CRC32C, m.Created.Format(time.RFC3339))
		}
	}
	return nil
}

// printGroups prints one line per group (run or variable) of sorted entries.
func printGroups(tw *tabwriter.Writer, es []sinks.Entry, title string, withVars bool, group func(sinks.Entry) string) {
	vcol := ""
	if withVars {
		vcol = "VARS\t"
	}
	fmt.Fprintf(tw, "%s\t%sSTEPS\tFIRST\tLATEST\tSIZE\tRAW\tRATIO\n", title, vcol)
	for i := 0; i < len(es); {
		g := group(es[i])
		vars := map[string]bool{}
		steps := map[uint64]bool{}
		first, latest := es[i].Key.Step, es[i].Key.Step
		var stored, raw uint64
		for ; i < len(es) && group(es[i]) == g; i++ {
			e := es[i]
			vars[e.Key.Var] = true
			steps[e.Key.Step] = true
			first, latest = min(first, e.Key.Step), max(latest, e.Key.Step)
			stored += e.Meta.Stored
			raw += e.Meta.RawBytes
		}
		ratio := 0.0
		if stored > 0 {
			ratio = float64(raw) / float64(stored)
		}
		if withVars {
			vcol = fmt.Sprintf("%d\t", len(vars))
		}
		fmt.Fprintf(tw, "%s\t%s%d\t%d\t%d\t%s\t%s\t%.2f\n", g, vcol, len(steps), first, latest, humanBytes(stored), humanBytes(raw), ratio)
	}
}

func dimsString(d []uint64) string {
	s := ""
	for i, v := range d {
		if i > 0 {
			s += "x"
		}
		s += strconv.FormatUint(v, 10)
	}
	return s
}
