package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/runner"
)

// runnerCommand runs the job runner inside a job sandbox. The daemon
// starts it; people don't.
func (a *app) runnerCommand() *cobra.Command {
	cfg := runner.Config{}
	var listen string
	cmd := &cobra.Command{
		Use:    "runner",
		Short:  "Run the job runner inside a job sandbox (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(a.stderr, nil)).With("runner_profile", cfg.Profile)
			r, err := runner.New(cfg)
			if err != nil {
				return usageError{err}
			}
			return serveRunner(cmd.Context(), r, listen, cfg.Logger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Profile, "profile", jobspec.ProfileBrowser, "what the runner runs: browser, web, office or pdf")
	f.StringVar(&listen, "listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(jobspec.RunnerPort)), "address to serve the runner API on")
	f.StringVar(&cfg.InputDir, "in", jobspec.InputDir, "directory of the job's inputs")
	f.StringVar(&cfg.OutputDir, "out", jobspec.OutputDir, "directory to write the job's outputs into")
	f.IntVar(&cfg.Jobs, "jobs", 1, "jobs this runtime serves, one tenant's (1: Chromium runs as one process)")
	f.StringVar(&cfg.Chromium, "chromium", "", "Chromium binary (default: chromium-headless-shell, then chromium)")
	f.StringVar(&cfg.Soffice, "soffice", "", "LibreOffice's soffice (default: found on PATH)")
	f.StringVar(&cfg.Python, "python", "", "Python with LibreOffice's UNO bindings, for the office converter (default: /usr/bin/python3)")
	return cmd
}

// serveRunner serves r's API on listen while it starts, until ctx ends
// (SIGTERM or SIGINT), then stops serving and closes r.
func serveRunner(ctx context.Context, r *runner.Runner, listen string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.InfoContext(ctx, "runner listening", "addr", ln.Addr().String())

	// /healthz says 503 until Start is done. Start stops early when
	// serving ends first.
	sctx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	started := make(chan error, 1)
	go func() { started <- r.Start(sctx) }()

	var runErr error
	startDone := false
	for done := false; !done; {
		select {
		case err := <-started:
			startDone = true
			if err != nil && ctx.Err() == nil {
				runErr, done = err, true
			}
		case <-ctx.Done():
			done = true
		case err := <-served:
			runErr, done = err, true
		}
	}
	cancelStart()
	if !startDone {
		<-started
	}
	log.Info("runner stopping")
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	if err := r.Stop(context.Background()); err != nil && runErr == nil {
		runErr = err
	}
	if errors.Is(runErr, http.ErrServerClosed) {
		runErr = nil
	}
	log.Info("runner stopped")
	return runErr
}
