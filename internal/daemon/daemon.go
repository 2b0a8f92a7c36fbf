// Package daemon wires Berth's subsystems into the running server and owns
// start-up and shutdown. It is the only package that imports them all.
package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/dashboard"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/tenant"
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
	// UIDRegistry is the host-wide file leasing sandbox uids to every
	// daemon of the host ("" is sandbox.DefaultUIDRegistry).
	UIDRegistry    string
	MaxSandboxes   int
	MaxCommands    int
	MaxHistory     int
	OutputCap      int64
	MaxUpload      int64
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// PreviewDomain serves sandbox ports at {port}-{sandbox}.{domain};
	// "localhost" works on this machine without DNS. "" turns it off.
	PreviewDomain string
	// AllowEmptyDatabase lets the daemon start on a database that holds
	// nothing while sandbox directories exist (a lost write-ahead log, a
	// deleted berth.db); the directories are quarantined, never removed.
	// Without it such a start fails with reason database_empty_with_data.
	AllowEmptyDatabase bool
	// Egress configures sandboxes' outbound network (mode egress).
	Egress EgressConfig
	// WarmPools keeps pre-started sandboxes per template ("base=4").
	WarmPools []sandbox.PoolSpec
	// Browser sessions: the Chromium binary ("" finds one) and bounds.
	Chromium           string
	MaxBrowserSessions int
	BrowserIdleTimeout time.Duration
	// BrowserArtifacts bounds sessions' downloads and traces (zero: the
	// defaults; tests set less).
	BrowserArtifacts browser.ArtifactLimits
	// BrowserProviders are the remote providers (browserbase, steel)
	// remote sessions may name, built from the daemon's own credentials.
	BrowserProviders map[string]browser.Provider
	// The browser journal keeps each session's latest
	// BrowserJournalEntries actions (default 1000, at most 10000) within
	// BrowserJournalBytes (default 8 MiB; tests set less); a tenant keeps
	// at most BrowserMaxCheckpoints checkpoints (default 64).
	BrowserJournalEntries int
	BrowserJournalBytes   int64
	BrowserMaxCheckpoints int
	// Isolated browser sessions: the runtime of their sandboxes (container,
	// the default, or gvisor) and how many to keep started (0: none).
	BrowserIsolatedRuntime string
	BrowserIsolatedWarm    int
	// BrowserRecordings bounds recordings of browser sessions (zero
	// values: the defaults).
	BrowserRecordings browser.RecordingConfig
	// BrowserWarmContexts is how many spare host browser contexts to keep
	// ready (0: browser.DefaultWarmContexts; negative: none, and the
	// shared Chromium starts only when a session needs it, as in tenant
	// mode). Tests set -1: most never open a session.
	BrowserWarmContexts int
	// Sandbox jobs: the runtime they run in (container, gvisor or none),
	// whether this daemon consumes the queue, capacity, warm runtimes per
	// profile, action bundles, and the tools (""  finds them).
	JobsRuntime  string
	NoJobWorkers bool
	JobCapacity  jobs.Capacity
	JobPools     map[string]int
	ActionsDir   string
	JobChromium  string
	Soffice      string
	JobProfiles  map[string]jobs.Profile // tests shorten timeouts
	JobReuse     int                     // jobs per runtime (1: a fresh sandbox each)
	JobRetention time.Duration           // how long finished jobs are kept
	// TenantMode refuses what is not isolated: the process runtime and
	// browser sessions on the host.
	TenantMode bool
	// Tenant binds the data directory to one tenant (made on first start);
	// a directory bound to another refuses to start.
	Tenant string
	// StationID is the daemon's station ID in the Station method API
	// ("": httpapi.DefaultStationID).
	StationID string
	// Dashboard configures the web dashboard at / (internal/dashboard).
	Dashboard dashboard.Config
	// RateLimits bound requests per source and key (nil: the defaults).
	RateLimits *httpapi.RateLimits
	Logger     *slog.Logger
	// Ready, if set, is called with the listening address once the daemon
	// serves.
	Ready func(addr string)
	// Cluster, when set, makes the daemon a cluster's HQ or a worker
	// (cluster.go); nil runs everything here.
	Cluster *ClusterConfig
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
	// PreviewKeyFile holds the secret of preview tokens and links;
	// replacing it revokes them all.
	PreviewKeyFile = "preview.key"
	// EgressKeyFile seals egress sandboxes' CA keys and secrets in the
	// database; without it those cannot be read.
	EgressKeyFile = "egress.key"
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
	unlock, err := lockDataDir(dataDir, "berth serve")
	if err != nil {
		return err
	}
	defer unlock()
	// It holds keys, agent tokens and workspaces: only its owner may look,
	// even if it was made beforehand with a looser mode.
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("making the data directory private: %w", err)
	}
	if cfg.Cluster != nil && cfg.Cluster.Role == RoleHQ {
		return runHQ(ctx, cfg, dataDir, log)
	}
	// Before the database is opened (and an admin key made in it): an
	// empty database beside sandbox directories lost its state.
	if err := checkNotEmpty(ctx, dataDir, cfg.AllowEmptyDatabase, log); err != nil {
		return err
	}

	db, err := store.Open(ctx, filepath.Join(dataDir, DBFile))
	if err != nil {
		return err
	}
	defer db.Close()

	keys, err := adminKeys(ctx, db, dataDir, log)
	if err != nil {
		return err
	}

	var worker *workerSide
	tenantDB := db // where tenants' limits are read
	if cfg.Cluster != nil {
		if worker, err = openWorker(ctx, cfg.Cluster, cfg.Tenant, db); err != nil {
			return err
		}
		defer worker.db.Close()
		tenantDB = worker.db
		// HQ signs in people and limits rates; a worker serves HQ only.
		cfg.Dashboard.Off, cfg.RateLimits = true, &httpapi.RateLimits{}
		// A worker dedicated to a tenant runs in tenant mode: nothing that
		// is not isolated (the process runtime, browsers on the host).
		cfg.TenantMode = cfg.TenantMode || cfg.Tenant != ""
	}
	defaultTenant, err := bindTenant(ctx, dataDir, cfg.Tenant, db)
	if err != nil {
		return err
	}
	if n, err := db.AbandonUnfinishedIdempotency(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Info("released idempotency keys whose request a previous daemon did not finish", "keys", n)
	}
	tenantLimits := func(ctx context.Context, id string) (tenant.Limits, error) {
		t, err := tenantDB.GetTenant(ctx, id)
		if errcode.Is(err, errcode.NotFound) {
			return tenant.Limits{}, nil // removed while its last call ran
		}
		if err != nil {
			return tenant.Limits{}, err
		}
		return t.Limits, nil
	}
	var refuse func(*sandbox.CreateSpec, sandbox.Runtime) error
	if cfg.TenantMode {
		if err := checkIsolated(ctx, db); err != nil {
			return err
		}
		refuse = refuseUnisolated
		log.Info("tenant mode: isolated runtimes only, isolated browser sessions only")
	}

	bin := cfg.AgentBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("finding the berth binary: %w", err)
		}
	}
	oci := runtimes.OCIConfig{DataDir: dataDir, OCIRuntime: cfg.OCIRuntime, Runsc: cfg.Runsc}
	container := runtimes.NewContainer(oci)
	rts := []sandbox.Runtime{runtimes.Process{}, container, runtimes.NewGVisor(oci)}
	defaultRuntime := cfg.DefaultRuntime
	if defaultRuntime == "" {
		// Isolation by default wherever this machine offers it.
		defaultRuntime = "process"
		if container.Available() == nil {
			defaultRuntime = "container"
		}
	}
	for _, rt := range rts {
		if err := rt.Available(); err != nil {
			log.Info("runtime unavailable", "runtime", rt.Name(), "why", errcode.ReasonOf(err), "detail", err.Error())
		} else {
			log.Info("runtime available", "runtime", rt.Name(), "default", rt.Name() == defaultRuntime)
		}
	}
	seen := map[string]bool{}
	for _, p := range cfg.WarmPools {
		if seen[p.Template] {
			return errcode.WarmPoolDuplicate.New("warm pool %q is given twice", p.Template)
		}
		seen[p.Template] = true
	}
	network, err := newEgress(cfg.Egress, dataDir, db, log)
	if err != nil {
		return err
	}
	var sbNetwork sandbox.Network
	if network != nil {
		sbNetwork = network
		defer network.Close()
	}
	mgr := sandbox.NewManager(sandbox.Config{
		DefaultRuntime: defaultRuntime,
		DataDir:        dataDir, AgentBinary: bin, MaxSandboxes: cfg.MaxSandboxes, MaxCommands: cfg.MaxCommands,
		MaxHistory: cfg.MaxHistory, OutputCap: cfg.OutputCap, MaxUpload: cfg.MaxUpload,
		DefaultTimeout: cfg.DefaultTimeout, MaxTimeout: cfg.MaxTimeout, Logger: log,
		Pools: cfg.WarmPools, UIDRegistry: cfg.UIDRegistry, Network: sbNetwork,
		TenantLimits: tenantLimits, Refuse: refuse,
	}, db, rts...)
	if cfg.TenantMode && defaultRuntime == "process" {
		return errcode.TenantMode.New("tenant mode needs an isolated default runtime (container or gvisor); " +
			"this one is process (none other is available here, or --runtime chose it); see berth doctor")
	}
	sealer, err := broker.OpenSealer(filepath.Join(dataDir, EgressKeyFile))
	if err != nil {
		return err
	}

	previewSecret, err := loadSecret(filepath.Join(dataDir, PreviewKeyFile))
	if err != nil {
		return err
	}
	isolatedBrowsers, err := isolatedBrowsersOf(cfg, mgr, network != nil, log)
	if err != nil {
		return err
	}
	browsers := browser.NewManager(browser.Config{
		Chromium: cfg.Chromium, DataDir: filepath.Join(dataDir, "browser"), Recordings: cfg.BrowserRecordings,
		MaxSessions: cfg.MaxBrowserSessions, IdleTimeout: cfg.BrowserIdleTimeout, Logger: log,
		Isolated: isolatedBrowsers, IsolatedWarm: cfg.BrowserIsolatedWarm, WarmContexts: hostWarmContexts(cfg),
		Journal: db, MaxJournalEntries: cfg.BrowserJournalEntries, MaxJournalBytes: cfg.BrowserJournalBytes,
		MaxCheckpoints: cfg.BrowserMaxCheckpoints, Providers: cfg.BrowserProviders,
		Artifacts: cfg.BrowserArtifacts,
	})
	if err := browsers.Available(); err != nil {
		log.Info("browser sessions unavailable", "why", err.Error())
	} else {
		log.Info("browser sessions available", "chromium", browsers.Config().Chromium)
	}
	jobsRuntime := cfg.JobsRuntime
	if jobsRuntime == "" {
		jobsRuntime = "container"
	}
	riverDB, err := sql.Open("sqlite", store.DSN(filepath.Join(dataDir, DBFile)))
	if err != nil {
		return fmt.Errorf("opening the job queue's database: %w", err)
	}
	// River on SQLite wants one connection: its own, beside the store's.
	riverDB.SetMaxOpenConns(1)
	defer riverDB.Close()
	jobsCfg := jobs.Config{
		DataDir: dataDir, Runtime: jobsRuntime, Chromium: cfg.JobChromium, Soffice: cfg.Soffice,
		Capacity: cfg.JobCapacity, Pools: cfg.JobPools, Workers: !cfg.NoJobWorkers, ActionsDir: cfg.ActionsDir,
		Profiles: cfg.JobProfiles, Reuse: cfg.JobReuse, Retention: cfg.JobRetention, Logger: log,
		TenantJobs: func(ctx context.Context, id string) int {
			l, _ := tenantLimits(ctx, id)
			return l.Jobs
		},
	}
	var jobStore jobs.Store = db
	if worker != nil {
		// A worker's jobs are the cluster's: records, files and River's
		// queue in the shared database.
		pool, err := riverPool(ctx, cfg.Cluster.Database)
		if err != nil {
			return err
		}
		defer pool.Close()
		jobsCfg.RiverPool, jobStore = pool, worker.db
		jobsCfg.Cluster = &jobs.Cluster{Worker: cfg.Cluster.WorkerID, Tenant: cfg.Tenant, Draining: worker.draining}
	}
	jobSvc, err := jobs.New(jobsCfg, jobStore, riverDB, mgr)
	if err != nil {
		return err
	}
	apiCfg := httpapi.Config{
		Version: cfg.Version, DataDir: dataDir, MaxUpload: mgr.Config().MaxUpload,
		Logger: log, Sandboxes: mgr, Browsers: browsers, Jobs: jobSvc, Keys: keys, DB: db,
		PreviewDomain: strings.ToLower(strings.Trim(cfg.PreviewDomain, ".")), PreviewSecret: previewSecret,
		Collectors: network.Collectors(),
		Tenants:    db, DefaultTenant: defaultTenant, BoundTenant: cfg.Tenant, TenantMode: cfg.TenantMode,
		Audit: db, Idempotency: db, Sealer: sealer, RateLimits: cfg.RateLimits,
		StationID: cfg.StationID, Dashboard: dashboardOf(cfg.Dashboard, log),
	}
	if worker != nil {
		apiCfg.Worker, apiCfg.DBUnavailable = worker.verifier, store.IsUnavailable
	}
	api := httpapi.New(apiCfg)
	defer api.Close()
	revocations, stopRevocations := context.WithCancel(context.Background())
	defer stopRevocations()
	go keys.PollRevocations(revocations, log)
	go sweepIdempotency(revocations, db, log)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	serve, served := apiPart(ctx, ln, api, log)

	// Each part starts once the one before is ready and stops in reverse
	// order: the API stops taking requests first, jobs stop before the
	// sandbox manager drains its pools (their runtime pools must not start
	// sandboxes the drain would miss), and the manager, which recovered
	// the sandboxes before anything could use them, stops last.
	ps := &parts{log: log}
	all := []part{
		{name: "sandboxes", start: mgr.Start, stop: mgr.Stop, stopTimeout: time.Minute},
		{name: "browsers", start: browsers.Start, stop: browsers.Stop, stopTimeout: 30 * time.Second},
		{name: "jobs", start: jobSvc.Start, stop: jobSvc.Stop, stopTimeout: 30 * time.Second},
		serve,
	}
	if worker != nil {
		// The lease is taken once the API serves, and given up before it
		// stops: HQ sends nothing to a worker that cannot answer.
		all = append(all, worker.member(cfg.Cluster, cfg, mgr, browsers, jobSvc, log))
	}
	if err := ps.start(ctx, all...); err != nil {
		ln.Close()
		return err
	}
	for _, h := range jobSvc.Actions() {
		if h.Available {
			log.Info("action available", "action", h.Name, "version", h.Version)
		} else {
			log.Info("action unavailable", "action", h.Name, "reason", h.Reason, "why", h.Message)
		}
	}
	return serveUntilDone(ctx, cfg, dataDir, ln.Addr().String(), ps, served, log)
}

// apiPart is the API's HTTP server on ln as a part: it serves at start and
// shuts down gracefully at stop. served yields what Serve returned: a
// failure, or http.ErrServerClosed after the stop.
func apiPart(ctx context.Context, ln net.Listener, api http.Handler, log *slog.Logger) (part, chan error) {
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	return part{name: "api", stopTimeout: 10 * time.Second,
		start: func(context.Context) error {
			go func() { served <- srv.Serve(ln) }()
			return nil
		},
		stop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if err != nil {
				err = errors.Join(err, srv.Close())
			}
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			return err
		},
	}, served
}

// serveUntilDone announces the started daemon at addr (daemon.json, the
// log, cfg.Ready), then waits for ctx to end or the API to fail, and stops
// ps.
func serveUntilDone(ctx context.Context, cfg Config, dataDir, addr string, ps *parts, served chan error, log *slog.Logger) error {
	info := Info{PID: os.Getpid(), Addr: addr, URL: "http://" + addr, Version: cfg.Version}
	if err := writeJSON(filepath.Join(dataDir, InfoFile), info); err != nil {
		return errors.Join(err, ps.stop())
	}
	defer os.Remove(filepath.Join(dataDir, InfoFile))
	role := "alone"
	if cfg.Cluster != nil {
		role = cfg.Cluster.Role
	}
	log.Info("berth serving", "addr", addr, "data", dataDir, "version", cfg.Version, "role", role)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
	var runErr error
	select {
	case err := <-served:
		runErr = fmt.Errorf("serving the API: %w", err)
		served <- http.ErrServerClosed // reported once, here: the api part's stop reads it
	case <-ctx.Done():
		log.Info("shutting down")
	}
	return errors.Join(runErr, ps.stop())
}

// adminKeys returns the keys of db, with the admin key in dataDir's
// KeyFile made if it holds none that works.
func adminKeys(ctx context.Context, db *store.DB, dataDir string, log *slog.Logger) (*auth.Keys, error) {
	keys := auth.NewKeys(db)
	keyPath := filepath.Join(dataDir, KeyFile)
	created, err := keys.EnsureAdminKey(ctx, keyPath)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created admin key", "path", keyPath)
	} else {
		log.Info("admin key", "path", keyPath)
	}
	return keys, nil
}

// lockDataDir takes an exclusive lock on the data directory for what (a
// daemon, or an offline command such as berth restore), so a second one
// refuses. The lock is a flock on the directory itself, held on an open
// descriptor until unlock or the process's death: removing or replacing
// any file in the directory does not release it. LockFile only notes the
// holder's PID for the message a refused process prints.
func lockDataDir(dir, what string) (unlock func(), err error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening data directory: %w", err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(filepath.Join(dir, LockFile))
			return nil, errcode.DataDirLocked.New("another berth daemon or command (%s) is using data directory %s; stop it first",
				cmp.Or(strings.TrimSpace(string(b)), "pid unknown"), dir)
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	note := fmt.Sprintf("pid %d, %s\n", os.Getpid(), what)
	if err := writeFileAtomic(filepath.Join(dir, LockFile), []byte(note)); err != nil {
		d.Close()
		return nil, fmt.Errorf("writing %s: %w", LockFile, err)
	}
	return func() { d.Close() }, nil
}

// checkNotEmpty refuses to start on a database that holds nothing while
// sandbox directories exist: the database lost its state (its write-ahead
// log was removed, or berth.db was replaced by a copy made without it),
// and starting would make a new admin key and sweep every workspace
// aside. With allow, it logs and lets the start go on; the sweep then
// quarantines the directories.
func checkNotEmpty(ctx context.Context, dataDir string, allow bool, log *slog.Logger) error {
	dirs, err := sandbox.SandboxDirs(dataDir)
	if err != nil || len(dirs) == 0 {
		return err
	}
	path := filepath.Join(dataDir, DBFile)
	s, err := store.Inspect(ctx, path)
	if err != nil || !s.Empty() {
		return err
	}
	if allow {
		log.WarnContext(ctx, "starting on an empty database beside sandbox directories; they will be quarantined",
			"database", path, "sandbox_dirs", len(dirs), "quarantine", sandbox.QuarantineDir(dataDir))
		return nil
	}
	return errcode.DatabaseEmptyWithData.New("the database %s holds no keys and no sandboxes, but %d sandbox directories exist in %s: "+
		"the database lost its state (a removed berth.db-wal, or a copy of berth.db made without it). "+
		"Nothing was changed. Put the database back (berth restore FILE, from a berth backup), "+
		"or start with --allow-empty-database to begin anew with the directories moved to %s "+
		"(berth quarantine ls lists them)",
		path, len(dirs), filepath.Join(dataDir, "sandboxes"), sandbox.QuarantineDir(dataDir))
}

// writeFileAtomic writes b to path (0600) through a temporary file renamed
// into place.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// loadSecret reads a 32-byte secret from path, creating it (0600, written
// in full before it is renamed into place) on first use.
func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		secret, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(secret) < 32 {
			return nil, fmt.Errorf("%s is not a 64-digit hex secret; remove it to make a new one", path)
		}
		return secret, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return nil, err
	}
	return secret, nil
}

// dashboardOf builds the web dashboard, or nil when it is off.
func dashboardOf(cfg dashboard.Config, log *slog.Logger) func(http.Handler) http.Handler {
	if cfg.Off {
		return nil
	}
	cfg.Logger = log
	return dashboard.New(cfg).Handler
}
