// Package daemon wires Berth's subsystems into the running server and owns
// start-up and shutdown. It is the only package that imports them all.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
)

// Config configures the daemon.
type Config struct {
	DataDir        string
	Listen         string
	Version        string
	AgentBinary    string // the berth binary run as each sandbox's agent
	DefaultRuntime string // "" picks container when available, else process
	OCIRuntime     string // auto, crun or runc
	Runsc          string // path of runsc; "" looks on PATH
	MaxSandboxes   int
	MaxCommands    int
	MaxHistory     int
	OutputCap      int64
	MaxUpload      int64
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	Logger         *slog.Logger
	// Ready, if set, is called with the listening address once the daemon
	// serves.
	Ready func(addr string)
}

// Info is what the daemon writes to <data>/daemon.json for local tools.
type Info struct {
	PID     int    `json:"pid"`
	Addr    string `json:"addr"`
	URL     string `json:"url"`
	Version string `json:"version"`
}

// InfoFile, KeyFile and LockFile are names in the data directory.
const (
	InfoFile = "daemon.json"
	KeyFile  = "admin.key"
	LockFile = "berth.lock"
	DBFile   = "berth.db"
)

// Run runs the daemon until ctx is done, then shuts down gracefully: it
// stops accepting, lets requests in flight finish (up to a bound), and
// leaves sandboxes running for the next start to re-adopt.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("creating data directory: %w", err)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()

	db, err := store.Open(ctx, filepath.Join(dataDir, DBFile))
	if err != nil {
		return err
	}
	defer db.Close()

	keys := auth.NewKeys(db)
	keyPath := filepath.Join(dataDir, KeyFile)
	created, err := keys.EnsureAdminKey(ctx, keyPath)
	if err != nil {
		return err
	}
	if created {
		log.Info("created admin key", "path", keyPath)
	} else {
		log.Info("admin key", "path", keyPath)
	}

	bin := cfg.AgentBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("finding the berth binary: %w", err)
		}
	}
	oci := sandbox.OCIConfig{DataDir: dataDir, OCIRuntime: cfg.OCIRuntime, Runsc: cfg.Runsc}
	runtimes := []sandbox.Runtime{sandbox.ProcessRuntime{}, sandbox.NewContainerRuntime(oci), sandbox.NewGVisorRuntime(oci)}
	defaultRuntime := cfg.DefaultRuntime
	if defaultRuntime == "" {
		// Isolation by default wherever this machine offers it.
		defaultRuntime = "process"
		if runtimes[1].Available() == nil {
			defaultRuntime = "container"
		}
	}
	for _, rt := range runtimes {
		if err := rt.Available(); err != nil {
			log.Info("runtime unavailable", "runtime", rt.Name(), "why", errcode.ReasonOf(err), "detail", err.Error())
		} else {
			log.Info("runtime available", "runtime", rt.Name(), "default", rt.Name() == defaultRuntime)
		}
	}
	mgr := sandbox.NewManager(sandbox.Config{
		DefaultRuntime: defaultRuntime,
		DataDir:        dataDir, AgentBinary: bin, MaxSandboxes: cfg.MaxSandboxes, MaxCommands: cfg.MaxCommands,
		MaxHistory: cfg.MaxHistory, OutputCap: cfg.OutputCap, MaxUpload: cfg.MaxUpload,
		DefaultTimeout: cfg.DefaultTimeout, MaxTimeout: cfg.MaxTimeout, Logger: log,
	}, db, runtimes...)
	defer mgr.Close()
	if err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recovering sandboxes: %w", err)
	}

	api := httpapi.New(httpapi.Config{
		Version: cfg.Version, DataDir: dataDir, MaxUpload: mgr.Config().MaxUpload,
		Logger: log, Sandboxes: mgr, Keys: keys, DB: db,
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	addr := ln.Addr().String()
	info := Info{PID: os.Getpid(), Addr: addr, URL: "http://" + addr, Version: cfg.Version}
	if err := writeJSON(filepath.Join(dataDir, InfoFile), info); err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(filepath.Join(dataDir, InfoFile))
	log.Info("berth serving", "addr", addr, "data", dataDir, "version", cfg.Version)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	watched := make(chan struct{})
	go func() { defer close(watched); _ = mgr.Run(runCtx) }()
	defer func() { stopRun(); <-watched }()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close()
	}
	<-errc
	return nil
}

// lockDataDir takes an exclusive lock on the data directory, so a second
// daemon on it refuses to start. The lock dies with the process.
func lockDataDir(dir string) (func(), error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errcode.WithReason(errcode.Conflict, "data_dir_locked",
				"another berth daemon (pid %s) is using data directory %s", cmpStr(holder, "unknown"), dir)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

func cmpStr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
