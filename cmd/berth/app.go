package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
)

// app holds the CLI's I/O and the exit code a subcommand chose.
type app struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	exitCode       int

	url, token, data, user string
}

func newApp(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
}

// usageError marks errors in how the CLI was called (exit code 2).
type usageError struct{ error }

// exitError carries an exit code chosen by a subcommand, with nothing more
// to print.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// report prints err and returns the exit code for it.
func (a *app) report(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(a.stderr, "berth:", ue.error)
		return 2
	}
	var ce *errcode.Error
	if errors.As(err, &ce) {
		msg := ce.Message
		if ce.Reason != "" {
			msg = fmt.Sprintf("%s (%s)", msg, ce.Reason)
		}
		if ce.RequestID != "" && (ce.Code == errcode.Internal || ce.Code == errcode.Unavailable) {
			msg += " [request " + ce.RequestID + "]"
		}
		fmt.Fprintf(a.stderr, "berth: %s: %s\n", ce.Code, msg)
		for k, v := range ce.Problems {
			fmt.Fprintf(a.stderr, "  %s: %s\n", k, v)
		}
		return 1
	}
	fmt.Fprintln(a.stderr, "berth:", err)
	return 1
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Berth: sandboxes, browser sessions and jobs for AI agents, in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cobra.AddTemplateFunc("plainBools", plainBools)
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), ".FlagUsages | trimTrailingWhitespaces",
		".FlagUsages | plainBools | trimTrailingWhitespaces"))
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "daemon URL (env BERTH_URL; default from --data's daemon.json, else http://127.0.0.1:7070)")
	pf.StringVar(&a.token, "token", "", "API key (env BERTH_TOKEN; default --data's admin.key)")
	pf.StringVar(&a.user, "user", "", "end user the call acts for, sent as Berth-User (env BERTH_USER; jobs count capacity per user)")
	pf.StringVar(&a.data, "data", "", "local data directory to read the admin key and address from (env BERTH_DATA; default ./.berth)")
	root.AddCommand(
		a.serveCommand(),
		a.agentCommand(),
		a.sandboxCommand(),
		a.secretCommand(),
		a.execCommand(),
		a.shellCommand(),
		a.serviceCommand(),
		a.templateCommand(),
		a.browserCommand(),
		a.jobCommand(),
		a.actionsCommand(),
		a.fsCommand(),
		a.keysCommand(),
		a.tenantCommand(),
		a.auditCommand(),
		a.workersCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.quarantineCommand(),
		a.doctorCommand(),
		a.mcpCommand(),
		a.probeCommand(),
		a.runnerCommand(),
		&cobra.Command{
			Use: "version", Short: "Print the version",
			RunE: func(*cobra.Command, []string) error { fmt.Fprintln(a.stdout, version); return nil },
		},
	)
	markUsageErrors(root)
	return root
}

// plainBools drops pflag's "[=true|false]" after boolean flags in a flag
// listing (--json, not --json[=true|false]) and aligns the usage column
// again. A line that is not a flag's (a usage continued on a second line)
// is kept as it is.
func plainBools(usages string) string {
	const sep = "   " // pflag pads the flag column with at least three spaces
	lines := strings.Split(usages, "\n")
	type row struct{ flag, usage string }
	rows := make([]*row, len(lines))
	width := 0
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(t, "-") {
			continue
		}
		flag, usage, ok := strings.Cut(t, sep)
		if !ok {
			continue
		}
		flag = l[:len(l)-len(t)] + strings.Replace(flag, "[=true|false]", "", 1)
		rows[i] = &row{flag, strings.TrimLeft(usage, " ")}
		width = max(width, len(flag))
	}
	for i, r := range rows {
		if r != nil {
			lines[i] = r.flag + strings.Repeat(" ", width-len(r.flag)) + sep + r.usage
		}
	}
	return strings.Join(lines, "\n")
}

// markUsageErrors makes argument errors usage errors (exit 2) throughout the
// tree, and makes command groups reject an unknown subcommand (cobra would
// print help and exit 0, or exit 1).
func markUsageErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
	if !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
		}
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
}

// dataDir returns the data directory the client side should read.
func (a *app) dataDir() string {
	return firstNonEmpty(a.data, a.getenv("BERTH_DATA"), ".berth")
}

// client builds an API client from flags, environment and the local data
// directory.
func (a *app) client() (*client.Client, error) {
	url := firstNonEmpty(a.url, a.getenv("BERTH_URL"))
	if url == "" {
		var info daemon.Info
		if b, err := os.ReadFile(filepath.Join(a.dataDir(), daemon.InfoFile)); err == nil && json.Unmarshal(b, &info) == nil {
			url = info.URL
		}
	}
	if url == "" {
		url = "http://127.0.0.1:7070"
	}
	token := firstNonEmpty(a.token, a.getenv("BERTH_TOKEN"))
	if token == "" {
		b, err := os.ReadFile(filepath.Join(a.dataDir(), daemon.KeyFile))
		if err != nil {
			return nil, usageError{errors.New("no API key: set BERTH_TOKEN, pass --token, or --data DIR of a local daemon")}
		}
		token = strings.TrimSpace(string(b))
	}
	var opts []client.Option
	if user := firstNonEmpty(a.user, a.getenv("BERTH_USER")); user != "" {
		opts = append(opts, client.WithUser(user))
	}
	return client.New(url, token, opts...), nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// bindEnv gives every flag of fs a BERTH_* environment equivalent
// (--max-upload is BERTH_MAX_UPLOAD), used when the flag is not given.
func (a *app) bindEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "BERTH_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := a.getenv(name); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = usageError{fmt.Errorf("%s=%q: %v", name, v, serr)}
			}
		}
	})
	return err
}

// sizeValue is a byte size flag that takes 64MiB, 1GB, 4096 and the like.
type sizeValue int64

func (s *sizeValue) String() string { return strconv.FormatInt(int64(*s), 10) }
func (s *sizeValue) Type() string   { return "size" }

func (s *sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeValue(n)
	return nil
}

func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size: %q (use bytes or a unit such as 64MiB)", v)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is too large", v)
	}
	return n * mult, nil
}
