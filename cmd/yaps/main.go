// Command yaps runs the Yaps list server and its tools.
//
//	yaps serve            run the HTTP + sync server
//	yaps doc json|merge   inspect and merge Yjs update files
//	yaps bench crdt|http|sync
//
// main stays thin: each subcommand lives in its own file and registers
// itself with register, so the binary can be tested end to end in-process.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. It reads args (without the subcommand name),
// writes results to stdout and diagnostics to stderr, and returns when ctx is
// cancelled or the work is done.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("yaps: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func main() {
	ctx, stop := shutdownSignals()
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "yaps:", err)
		os.Exit(1)
	}
}

// shutdownSignals returns a context cancelled by the first SIGINT or
// SIGTERM. The signals then get their default action back, so a second one
// ends the process at once instead of waiting out a graceful shutdown.
func shutdownSignals() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("no command given")
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: yaps <command> [flags]")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
}
