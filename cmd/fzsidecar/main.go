// Command fzsidecar is an in-situ compression sidecar for simulation
// snapshots: it ingests shared-memory snapshots announced over NATS,
// compresses them with the FZ error-bounded codec (CPU or GPU) and stores
// them on local disk or S3. It also offers the codec as standalone tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so the wiring here stays free of any package's details.
type command struct {
	name    string
	summary string
	// run parses args with its own FlagSet and does the work.
	run func(ctx context.Context, args []string) error
}

var commands = map[string]*command{}

// subcommands routes a two-word command ("bench e2e") to a registered one,
// so a command can grow a subcommand from its own file without editing the
// file of the command it extends.
var subcommands = map[string]string{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error already explained to the user by a FlagSet.
var errUsage = errors.New("usage error")

func usage(w io.Writer) {
	fmt.Fprintf(w, "fzsidecar: in-situ error-bounded compression for simulation snapshots\n\nUsage: fzsidecar <command> [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'fzsidecar help <command>' (or 'fzsidecar <command> --help') for a command's flags;\n'fzsidecar version' prints the version.\n")
}

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(os.Stdout)
		return 0
	case "help":
		return help(args[1:])
	case "version", "--version", "-version", "-V":
		printVersion(os.Stdout)
		return 0
	}
	if len(args) > 1 {
		if name, ok := subcommands[args[0]+" "+args[1]]; ok {
			args = append([]string{name}, args[2:]...)
		}
	}
	c, ok := commands[args[0]]
	if !ok {
		unknownCommand(args[0])
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintf(os.Stderr, "fzsidecar %s: %v\n", c.name, err)
	return 1
}

// helpOut, when set, receives a FlagSet's usage: `help CMD` prints it on
// stdout, where a pager or grep finds it.
var helpOut io.Writer

// newFlags makes a FlagSet whose --help prints the command's synopsis.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	if helpOut != nil {
		fs.SetOutput(helpOut)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: fzsidecar %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and allows flags after positional arguments too
// (Go's flag package stops at the first positional one).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			suggestFlag(fs, err, args)
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// usageErr prints a message and the command's usage, returning errUsage.
func usageErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "fzsidecar %s: %s\n\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return errUsage
}

// argErr prints only a message (for a mistake the message fully explains,
// where the flag list would bury it), returning errUsage.
func argErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "fzsidecar %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	return errUsage
}

// help prints the overview, or one command's usage and flags on stdout
// (`fzsidecar help ls` is `fzsidecar ls --help`).
func help(args []string) int {
	if len(args) == 0 {
		usage(os.Stdout)
		return 0
	}
	name := strings.Join(args, " ")
	if sub, ok := subcommands[name]; ok {
		name = sub
	}
	c, ok := commands[name]
	if !ok {
		unknownCommand(name)
		return 2
	}
	helpOut = os.Stdout
	defer func() { helpOut = nil }()
	if err := c.run(context.Background(), []string{"--help"}); err != nil && !errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 0
}

// unknownCommand names the closest commands to a mistyped one.
func unknownCommand(name string) {
	fmt.Fprintf(os.Stderr, "fzsidecar: unknown command %q\n", name)
	if near := nearest(name); len(near) > 0 {
		fmt.Fprintf(os.Stderr, "Did you mean %s?\n", strings.Join(near, " or "))
	}
	fmt.Fprintf(os.Stderr, "Run 'fzsidecar help' for the list of commands.\n")
}

// nearest lists the commands within two edits of name, or that name
// starts (a prefix of at least two letters), closest first.
func nearest(name string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	names := []string{"help", "version"}
	for n := range commands {
		names = append(names, n)
	}
	for _, n := range names {
		d := editDistance(strings.ToLower(name), n)
		if len(name) >= 2 && strings.HasPrefix(n, strings.ToLower(name)) {
			d = min(d, 1)
		}
		if d <= 2 && d < len(n) {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for _, c := range cs {
		out = append(out, "'"+c.name+"'")
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, counting a swap of
// two adjacent letters as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// suggestFlag follows the flag package's "flag provided but not defined"
// (printed above the usage) with the nearest defined flags, naming the
// flag as it was typed in args (-o or --o: the error says -o for both).
func suggestFlag(fs *flag.FlagSet, err error, args []string) {
	bad, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return
	}
	bad = strings.TrimLeft(bad, "-")
	typed := "-" + bad
	for _, a := range args {
		if a == "--" {
			break
		}
		if name, _, _ := strings.Cut(a, "="); name == "-"+bad || name == "--"+bad {
			typed = name
			break
		}
	}
	var near []string
	best := 3 // suggest only the closest flags, at most two edits away
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(bad, f.Name)
		if len(bad) >= 3 && strings.HasPrefix(f.Name, bad) {
			d = min(d, 1)
		}
		if d >= len(f.Name) || d > best {
			return
		}
		if d < best {
			best, near = d, nil
		}
		near = append(near, "--"+f.Name)
	})
	if len(near) > 0 {
		fmt.Fprintf(fs.Output(), "\nfzsidecar %s: unknown flag %s. Did you mean %s?\n", fs.Name(), typed, strings.Join(near, " or "))
	}
}
