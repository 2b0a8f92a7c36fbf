// Command berth is Berth's one binary: the daemon (berth serve), the
// in-sandbox agent (berth agent) and the command-line client.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/berthdev/berth/internal/agent"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == agent.SpawnCommand {
		// The agent's spawn helper, between the agent's fork and a
		// command's exec: nothing else may run first.
		agent.Spawn(os.Args[2:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(getenv, stdin, stdout, stderr)
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if ctx.Err() != nil && !errors.As(err, &ee) {
			// Interrupted (Ctrl-C, SIGTERM): what failed after it is its
			// consequence, not news. Exit as a shell does, quietly.
			return exitCanceled
		}
		return app.report(err)
	}
	return app.exitCode
}
