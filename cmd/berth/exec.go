package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
)

// Exit codes for commands that did not exit by themselves, as timeout(1)
// and shells use them.
const (
	exitTimedOut    = 124
	exitNotStarted  = 127
	exitCanceled    = 130
	exitInterrupted = 125
)

func (a *app) execCommand() *cobra.Command {
	var (
		cwd         string
		env         []string
		timeout     time.Duration
		interactive bool
	)
	cmd := &cobra.Command{
		Use:   "exec SANDBOX -- COMMAND [ARG...]",
		Short: "Run a command in a sandbox, stream its output and exit with its code",
		Long: `Run a command in a sandbox. Output streams as it is produced; berth exits with
the command's exit code (128+N when killed by signal N, 124 on timeout, 127
when it could not start). Use sh -c '...' for shell syntax. With -i, standard
input is forwarded to the command.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			// First: flags after the sandbox ID are parsed here.
			argv, err := commandArgv(cmd, args[1:])
			if err != nil {
				return err
			}
			envMap, err := parseKV(env, "--env")
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			sbID := args[0]
			req := apitype.CreateCommandRequest{Argv: argv, Cwd: cwd, Env: envMap, TimeoutMS: timeout.Milliseconds(), StdinOpen: interactive}
			// Finish starting the command even when interrupted meanwhile
			// (giving up 5s after the interrupt): a command started but
			// unseen could not be canceled, and would run on.
			startCtx, giveUp := context.WithCancel(context.WithoutCancel(ctx))
			defer giveUp()
			stopGiveUp := context.AfterFunc(ctx, func() { time.AfterFunc(5*time.Second, giveUp) })
			rec, err := c.Exec(startCtx, sbID, req)
			stopGiveUp()
			if ctx.Err() != nil {
				if err == nil {
					cancelCommand(c, sbID, rec.ID)
				}
				return exitError{exitCanceled}
			}
			if err != nil {
				return err
			}
			if interactive {
				go a.forwardStdin(ctx, c, sbID, rec.ID)
			}
			final, err := c.Stream(ctx, sbID, rec.ID, 0, 0, func(ev client.Event) error {
				data := []byte(ev.Data)
				if ev.DataBase64 != "" {
					data, _ = base64.StdEncoding.DecodeString(ev.DataBase64)
				}
				switch ev.Name {
				case "stdout":
					_, err := a.stdout.Write(data)
					return err
				case "stderr":
					_, err := a.stderr.Write(data)
					return err
				}
				return nil
			})
			if err != nil {
				if ctx.Err() != nil {
					// Interrupted here: stop the command there too.
					cancelCommand(c, sbID, rec.ID)
					return exitError{exitCanceled}
				}
				return err
			}
			if final.Signal == "SIGKILL" || (final.ExitCode != nil && *final.ExitCode == 137) {
				// The stream relays the agent's record; the daemon's read
				// knows more, such as a kill by the OOM killer.
				if rec, err := c.Command(ctx, sbID, final.ID, client.CommandQuery{MaxBytes: 1}); err == nil {
					final = &rec
				}
			}
			return a.exitFor(final)
		},
	}
	f := cmd.Flags()
	// Flags stop at the sandbox ID, so `berth exec SBX ls -la` runs ls -la;
	// flags after the ID come before a -- (commandArgv).
	f.SetInterspersed(false)
	f.StringVar(&cwd, "cwd", "", "working directory, relative to the workspace")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "kill the command after this long (default: the daemon's)")
	f.BoolVarP(&interactive, "interactive", "i", false, "forward standard input")
	return cmd
}

// commandArgv splits what follows the sandbox ID: the command itself
// (`ls -la`), or flags then -- then the command (`--cwd src -- make`).
func commandArgv(cmd *cobra.Command, rest []string) ([]string, error) {
	if len(rest) == 0 || !strings.HasPrefix(rest[0], "-") {
		return rest, nil
	}
	dash := slices.Index(rest, "--")
	if dash < 0 {
		return nil, usageError{fmt.Errorf("%q after the sandbox ID: put flags before -- and the command after it, as in berth exec SBX --cwd src -- make", rest[0])}
	}
	if err := cmd.Flags().Parse(rest[:dash]); err != nil {
		return nil, usageError{err}
	}
	if cmd.Flags().NArg() > 0 {
		return nil, usageError{fmt.Errorf("%q before --: the command goes after --", cmd.Flags().Arg(0))}
	}
	if dash+1 == len(rest) {
		return nil, usageError{fmt.Errorf("no command after --")}
	}
	return rest[dash+1:], nil
}

// cancelCommand cancels a command after berth exec was interrupted.
func cancelCommand(c *client.Client, sbID, cmdID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.Cancel(ctx, sbID, cmdID)
}

// exitFor maps a finished command to berth's exit code, printing why when
// the command did not simply exit.
func (a *app) exitFor(c *apitype.Command) error {
	switch {
	case c.Status == apitype.CommandExited && c.ExitCode != nil:
		if *c.ExitCode == 0 {
			return nil
		}
		return exitError{*c.ExitCode}
	case c.Status == apitype.CommandExited && c.Signal != "":
		fmt.Fprintf(a.stderr, "berth: command killed by %s\n", c.Signal)
		return exitError{128 + agent.SignalNumber(c.Signal)}
	case c.Status == apitype.CommandTimedOut:
		fmt.Fprintf(a.stderr, "berth: command timed out after %dms\n", c.TimeoutMS)
		return exitError{exitTimedOut}
	case c.Status == apitype.CommandCanceled:
		fmt.Fprintln(a.stderr, "berth: command canceled")
		return exitError{exitCanceled}
	case c.Status == apitype.CommandFailed && c.Reason == "oom":
		fmt.Fprintln(a.stderr, "berth: command killed by the OOM killer: the sandbox ran out of memory")
		return exitError{128 + 9}
	case c.Status == apitype.CommandFailed:
		fmt.Fprintf(a.stderr, "berth: command failed: %s\n", c.Reason)
		return exitError{exitNotStarted}
	}
	fmt.Fprintf(a.stderr, "berth: command %s: %s\n", c.Status, c.Reason)
	return exitError{exitInterrupted}
}

// forwardStdin copies the CLI's standard input to the command, then closes
// the command's.
func (a *app) forwardStdin(ctx context.Context, c *client.Client, sbID, cmdID string) {
	buf := make([]byte, 32<<10)
	for {
		n, err := a.stdin.Read(buf)
		if n > 0 {
			req := apitype.StdinRequest{DataBase64: base64.StdEncoding.EncodeToString(buf[:n])}
			if c.Stdin(ctx, sbID, cmdID, req) != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				_ = c.Stdin(ctx, sbID, cmdID, apitype.StdinRequest{EOF: true})
			}
			return
		}
	}
}
