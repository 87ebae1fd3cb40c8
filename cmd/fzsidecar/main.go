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
	fmt.Fprintf(w, "\nRun 'fzsidecar <command> --help' for a command's flags.\n")
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
	case "-h", "--help", "help":
		usage(os.Stdout)
		return 0
	}
	if len(args) > 1 {
		if name, ok := subcommands[args[0]+" "+args[1]]; ok {
			args = append([]string{name}, args[2:]...)
		}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "fzsidecar: unknown command %q\n\n", args[0])
		usage(os.Stderr)
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

// newFlags makes a FlagSet whose --help prints the command's synopsis.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
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
