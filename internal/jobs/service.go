package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/sandbox"
)

// Capacity bounds jobs starting or running at once.
type Capacity struct {
	Global, Tenant, User int
}

// DefaultCapacity is the seed's: 20 in all, 4 per tenant, 2 per user.
var DefaultCapacity = Capacity{Global: 20, Tenant: 4, User: 2}

// Limits on a job's files.
const (
	MaxInputBytes  = 350 << 20 // all inputs of a job together
	MaxOutputBytes = 350 << 20 // all outputs of a job together
	MaxInputs      = 256
)

// Config configures the job service.
type Config struct {
	DataDir string
	// Runtime is the sandbox runtime jobs run in: container (the default)
	// or gvisor. "none" (or the process runtime, which is not a safe
	// place for untrusted documents) leaves jobs RUNTIME_UNBOUND.
	Runtime string
	// Chromium and Soffice are the binaries the runner uses inside job
	// sandboxes ("" lets it look for them).
	Chromium, Soffice string
	Capacity          Capacity
	// TenantJobs returns a tenant's own bound on its running jobs (0:
	// Capacity.Tenant); nil: Capacity.Tenant for every tenant.
	TenantJobs func(ctx context.Context, tenant string) int
	// Pools is how many fresh runtimes to keep started per profile.
	Pools map[string]int
	// Workers false runs no queue consumer: jobs are refused with
	// WORKER_UNAVAILABLE (an API-only node).
	Workers     bool
	MaxAttempts int
	// ActionsDir holds action bundles, one directory each.
	ActionsDir string
	// Reuse is how many jobs one runtime serves (1, the default: a fresh
	// sandbox per job). Above 1 a runtime serves up to that many jobs of
	// the tenant of its first, one after another, each in a fresh browser
	// context with the previous job's files removed: more throughput, less
	// isolation between one tenant's jobs.
	Reuse int
	// Retention is how long a finished job (its record, events and files)
	// is kept; 0 takes DefaultRetention.
	Retention time.Duration
	// Profiles overrides profile defaults (tests shorten timeouts).
	Profiles map[string]Profile
	Logger   *slog.Logger
	// RiverPool, when set, is a pgx pool on the Postgres database (a
	// cluster's): River keeps its queue there through riverpgxv5, so a
	// job is queued once and any worker may run it, and New's riverDB is
	// unused. Nil: River runs on riverDB, the SQLite database.
	RiverPool *pgxpool.Pool
	// Cluster, when set, makes the service one node of a cluster's
	// (RiverPool and the store are the shared Postgres).
	Cluster *Cluster
}

// Cluster is a node's part in a cluster's jobs (docs/operations.md). HQ
// queues, reports and cancels jobs and runs none; each worker consumes the
// queues of the profiles it can run (of its tenant's jobs only, when it is
// bound to one) and runs their attempts in its own sandboxes. The jobs'
// records and files are in the shared database, so any node reads them.
type Cluster struct {
	// Worker is this node's worker ID; "" on HQ.
	Worker string
	// Tenant is the name of the tenant a worker is bound to, "" for one
	// shared by every tenant without workers of its own.
	Tenant string
	// Route (HQ) reports where a job of tenant's (its ID) for action
	// (name@version) would run: the name of the tenant whose own workers
	// take it, or "" for the shared ones. An errcode error says why no
	// worker would; any other error is the database's.
	Route func(ctx context.Context, tenant, action string) (string, error)
	// Draining (a worker) reports whether HQ drains it: it starts no new
	// attempt then, and another worker takes the job.
	Draining func(ctx context.Context) bool
	// ReadWorkspace (HQ) opens a file of sandbox's workspace for who, on
	// the sandbox's worker, which checks the tenant and the path as every
	// file call; SandboxWorker (HQ) is the worker that owns sandbox, if who
	// may use it and it would run action (name@version) now: a job writing
	// into a workspace runs on the sandbox's worker.
	ReadWorkspace func(ctx context.Context, who Principal, sandbox, path string) (io.ReadCloser, error)
	SandboxWorker func(ctx context.Context, who Principal, sandbox, action string) (string, error)
}

// Queue is the River queue of a cluster's jobs of profile: one per
// profile, so a worker takes only what it can run, and apart for a tenant
// with workers of its own (tenantName). One daemon alone uses River's
// default queue.
func Queue(profile, tenantName string) string {
	if tenantName == "" {
		return "jobs_" + profile
	}
	sum := sha256.Sum256([]byte(tenantName))
	return "jobs_" + profile + "_t" + hex.EncodeToString(sum[:6])
}

// WorkerQueue is the River queue of a cluster's jobs of profile that must
// run on worker: they write into a workspace there.
func WorkerQueue(profile, worker string) string {
	sum := sha256.Sum256([]byte(worker))
	return "jobs_" + profile + "_w" + hex.EncodeToString(sum[:6])
}

// hq reports whether the service is a cluster's HQ: it runs no job.
func (s *Service) hq() bool { return s.cfg.Cluster != nil && s.cfg.Cluster.Worker == "" }

// DefaultRetention keeps finished jobs a week.
const DefaultRetention = 7 * 24 * time.Hour

// DefaultPools keeps a browser runtime warm per CPU (at least two) and an
// office runtime per two CPUs (at least one); a pdf runtime (qpdf,
// exiftool: nothing to warm) and a web runtime (Chromium with egress, for
// the URL actions: an operator opts in with --job-pool web=N) start with
// their job. Runtimes are started
// ahead at a low CPU weight (see poolCPUShares), so more of them never
// slow a job that has one.
var DefaultPools = defaultPools(goruntime.NumCPU())

func defaultPools(cpus int) map[string]int {
	return map[string]int{jobspec.ProfileBrowser: max(2, cpus), jobspec.ProfileOffice: max(1, cpus/2), jobspec.ProfilePDF: 0,
		jobspec.ProfileWeb: 0}
}

// Service queues, runs and reports jobs.
type Service struct {
	cfg      Config
	log      *slog.Logger
	store    Store
	blobs    *Blobs
	mgr      *sandbox.Manager
	riverDB  *sql.DB
	river    queue
	actions  map[string]*action
	profiles map[string]Profile
	pools    map[string]*runtimePool
	metrics  *metrics
	lock     *runtimeLock

	admitMu sync.Mutex // capacity check and the move to starting, together

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc // job ID -> its work's cancel
	subs    map[string]map[chan struct{}]bool  // job ID -> event pokes
	held    map[string]bool                    // job sandboxes in a pool or a job
	started bool

	consuming bool // River consumes queues here (set at Start)

	wg   sync.WaitGroup
	stop context.CancelFunc
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// New returns the job service. riverDB is River's own pool on the
// daemon's SQLite database; it needs one connection at most. On Postgres
// (cfg.RiverPool set) it is unused and may be nil.
func New(cfg Config, store Store, riverDB *sql.DB, mgr *sandbox.Manager) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Capacity == (Capacity{}) {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Pools == nil {
		cfg.Pools = DefaultPools
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Reuse <= 0 {
		cfg.Reuse = 1
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "container"
	}
	var shared Contents
	if cfg.Cluster != nil {
		c, ok := store.(Contents)
		if !ok {
			return nil, errors.New("a cluster's job store must hold the files' contents too")
		}
		shared = c
	}
	blobs, err := NewBlobs(filepath.Join(cfg.DataDir, "files"), store, shared)
	if err != nil {
		return nil, err
	}
	actions, err := loadActions(cfg.ActionsDir)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger, store: store, blobs: blobs, mgr: mgr, riverDB: riverDB,
		actions: actions, profiles: map[string]Profile{}, pools: map[string]*runtimePool{}, metrics: newMetrics(),
		running: map[string]context.CancelCauseFunc{}, subs: map[string]map[chan struct{}]bool{}, held: map[string]bool{}}
	s.lock = s.newRuntimeLock()
	for _, name := range profiles {
		s.profiles[name] = DefaultProfile(name)
		if p, ok := cfg.Profiles[name]; ok {
			p.Name = name
			s.profiles[name] = p
		}
		s.pools[name] = newRuntimePool(s, name, cfg.Pools[name])
	}
	for _, a := range actions {
		if a.invalid != "" {
			s.log.Warn("action bundle is invalid", "action", a.spec.Name, "dir", a.dir, "why", a.invalid)
		}
	}
	return s, nil
}

// Blobs returns the file store.
func (s *Service) Blobs() *Blobs { return s.blobs }

// Start migrates River's tables, recovers jobs a previous daemon left
// unfinished, and starts the queue consumer, the runtime pools and the
// sweeper. It returns once they run.
func (s *Service) Start(ctx context.Context) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{s: s})
	rc := &river.Config{
		Logger:        quietLogger(s.log),
		Workers:       workers,
		FetchCooldown: 5 * time.Millisecond,
		// Inserts wake the producer at once (riversqlite emulates
		// LISTEN/NOTIFY); polling is the backstop and how snoozed jobs
		// (waiting for capacity) come back.
		FetchPollInterval:           200 * time.Millisecond,
		MaxAttempts:                 s.cfg.MaxAttempts + 1, // the jobs table decides; River never gives up first
		RescueStuckJobsAfter:        10 * time.Minute,
		RetryPolicy:                 retryPolicy{},
		JobTimeout:                  -1, // each work bounds itself by its profile's hard deadline
		CompletedJobRetentionPeriod: time.Hour,
	}
	if s.cfg.Workers {
		rc.Queues = s.queues()
	}
	var err error
	if s.cfg.RiverPool != nil {
		s.river, err = newPostgresQueue(ctx, s.cfg.RiverPool, rc)
	} else {
		s.river, err = newSQLiteQueue(ctx, s.riverDB, rc)
	}
	if err != nil {
		return err
	}
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("recovering jobs: %w", err)
	}
	if !s.hq() {
		s.recordRuntime(ctx)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	if s.consuming {
		if err := s.river.Start(runCtx); err != nil {
			stop()
			return fmt.Errorf("starting the job queue: %w", err)
		}
		if s.bound() == nil {
			for _, p := range s.pools {
				if p.size > 0 && s.profileProblem(p.profile) == "" {
					s.wg.Add(1)
					go func() { defer s.wg.Done(); p.run(runCtx) }()
				}
			}
		}
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.sweep(runCtx) }()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	return nil
}

// queues are the River queues the service consumes: the default queue on
// one daemon; on a cluster's worker, one per profile it can run (none on
// HQ, which runs no job).
func (s *Service) queues() map[string]river.QueueConfig {
	qc := river.QueueConfig{MaxWorkers: s.cfg.Capacity.Global}
	if s.cfg.Cluster == nil {
		s.consuming = true
		return map[string]river.QueueConfig{river.QueueDefault: qc}
	}
	out := map[string]river.QueueConfig{}
	if s.hq() || s.bound() != nil {
		return out
	}
	for _, p := range profiles {
		if why := s.profileProblem(p); why != "" {
			s.log.Info("this worker takes no job of a profile", "profile", p, "why", why)
			continue
		}
		out[Queue(p, s.cfg.Cluster.Tenant)] = qc
		out[WorkerQueue(p, s.cfg.Cluster.Worker)] = qc
	}
	s.consuming = len(out) > 0
	return out
}

// Stop stops the consumer (cancelling work in flight: it is requeued at
// the next start), the pools and the sweeper, and deletes the runtimes.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.started = false
	s.mu.Unlock()
	var err error
	if s.river != nil && s.consuming {
		if err = s.river.StopAndCancel(ctx); err != nil {
			err = fmt.Errorf("stopping the job queue: %w", err)
		}
	}
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	return err
}

// queue is River's client on either driver (the type parameter is the
// driver's transaction type): the calls the service makes.
type queue interface {
	Start(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobCancel(ctx context.Context, jobID int64) (*rivertype.JobRow, error)
	JobGet(ctx context.Context, id int64) (*rivertype.JobRow, error)
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
}

var (
	_ queue = (*river.Client[*sql.Tx])(nil)
	_ queue = (*river.Client[pgx.Tx])(nil)
)

// newSQLiteQueue migrates River's tables in the SQLite database and
// returns its client there.
func newSQLiteQueue(ctx context.Context, db *sql.DB, rc *river.Config) (queue, error) {
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: rc.Logger})
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrating the job queue: %w", err)
	}
	c, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("starting the job queue: %w", err)
	}
	return c, nil
}

// riverMigrationLock is the Postgres advisory lock River's migrations
// hold: workers that start together migrate in turn, not into each other.
const riverMigrationLock = 0x62657274_68000002 // "berth", 2

// newPostgresQueue migrates River's tables in the Postgres database and
// returns its client there. The migrations run while one connection holds
// riverMigrationLock (a session lock: River applies each version in a
// transaction of its own, and some cannot share one, as an enum value
// added and then used); the server releases it if this process dies.
func newPostgresQueue(ctx context.Context, pool *pgxpool.Pool, rc *river.Config) (queue, error) {
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: rc.Logger})
	if err != nil {
		return nil, err
	}
	if err := migratePostgresQueue(ctx, pool, migrator); err != nil {
		return nil, fmt.Errorf("migrating the job queue: %w", err)
	}
	c, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("starting the job queue: %w", err)
	}
	return c, nil
}

func migratePostgresQueue(ctx context.Context, pool *pgxpool.Pool, migrator *rivermigrate.Migrator[pgx.Tx]) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(riverMigrationLock)); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(riverMigrationLock)); err != nil {
			// Unsure whether it still holds the lock: close it, which
			// releases it.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// quietLogger passes River's warnings and errors, not its chatter.
func quietLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{l.Handler(), slog.LevelWarn}).With("component", "river")
}

type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

// retryPolicy retries a retryable failure after 1, 2, 4... seconds (at
// most a minute): a fresh sandbox is the remedy, not a long wait.
type retryPolicy struct{}

func (retryPolicy) NextRetry(j *riverJobRow) time.Time {
	return time.Now().Add(min(time.Second<<min(max(j.Attempt-1, 0), 6), time.Minute))
}

// Health reasons, from the seed.
const (
	ActionMissing       = "ACTION_MISSING"
	ActionInvalid       = "ACTION_INVALID"
	ProfileMissing      = "PROFILE_MISSING"
	RuntimeUnbound      = "RUNTIME_UNBOUND"
	VersionMismatch     = "VERSION_MISMATCH"
	ProfileUnhealthy    = "PROFILE_UNHEALTHY"
	ProviderUnavailable = "PROVIDER_UNAVAILABLE"
	WorkerUnavailable   = "WORKER_UNAVAILABLE"
)

// hints are what an operator does about each reason.
var hints = map[string]string{
	ActionMissing:       "check the action's name, or install its bundle in --actions-dir and restart",
	ActionInvalid:       "the bundle's files differ from its manifest: reinstall the bundle (recompute hashes from the released files) and restart",
	ProfileMissing:      "the action names a runtime profile this Berth does not define (browser, office): upgrade Berth or fix the bundle",
	RuntimeUnbound:      "jobs need an isolated runtime: run berth serve with --jobs-runtime container (or gvisor) on a machine that has it",
	VersionMismatch:     "the bundle needs another runner API than this Berth's: upgrade or roll back one side",
	ProfileUnhealthy:    "the profile's tools are missing or its sandboxes fail to start: run make deps (chromium-headless-shell, libreoffice-*-nogui) and see berth doctor and the daemon's log",
	ProviderUnavailable: "the sandbox runtime cannot run here: see GET /v1/system and berth doctor for why",
	WorkerUnavailable:   "no queue consumer runs on this daemon: start berth serve without --job-workers 0",
}

// bound checks the binding of jobs to a sandbox runtime.
func (s *Service) bound() *apitype.ActionHealth {
	if s.cfg.Runtime == "none" || s.cfg.Runtime == "process" {
		return &apitype.ActionHealth{Reason: RuntimeUnbound,
			Message: fmt.Sprintf("jobs are bound to no isolated runtime (--jobs-runtime %s)", s.cfg.Runtime)}
	}
	rt := s.runtimeNamed(s.cfg.Runtime)
	if rt == nil {
		return &apitype.ActionHealth{Reason: RuntimeUnbound, Message: fmt.Sprintf("runtime %q is not known", s.cfg.Runtime)}
	}
	if err := rt.Available(); err != nil {
		return &apitype.ActionHealth{Reason: ProviderUnavailable,
			Message: fmt.Sprintf("runtime %s is unavailable: %s", s.cfg.Runtime, errMessage(err))}
	}
	return nil
}

func (s *Service) runtimeNamed(name string) sandbox.Runtime {
	for _, rt := range s.mgr.Runtimes() {
		if rt.Name() == name {
			return rt
		}
	}
	return nil
}

func errMessage(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// profileProblem is why a profile's runtimes cannot work, or "".
func (s *Service) profileProblem(profile string) string {
	switch profile {
	case jobspec.ProfileBrowser:
		if s.cfg.Chromium != "" {
			if _, err := os.Stat(s.cfg.Chromium); err != nil {
				return fmt.Sprintf("Chromium %s is missing", s.cfg.Chromium)
			}
		} else if browser.FindChromium() == "" {
			return "no Chromium is installed (chromium-headless-shell or chromium)"
		}
	case jobspec.ProfileOffice:
		soffice := s.cfg.Soffice
		if soffice == "" {
			soffice = "soffice"
		}
		if _, err := exec.LookPath(soffice); err != nil {
			return fmt.Sprintf("LibreOffice (%s) is not installed", soffice)
		}
		// The runner's UNO converter (see docs/jobs.md).
		if _, err := os.Stat(jobspec.UNOModule); err != nil {
			return "LibreOffice's Python UNO bindings (python3-uno, " + jobspec.UNOModule + ") are not installed"
		}
	case jobspec.ProfileWeb:
		if why := s.profileProblem(jobspec.ProfileBrowser); why != "" {
			return why
		}
		if s.mgr.Config().Network == nil {
			return "this daemon serves no egress network (it was started with --egress=false, or not as root on Linux), and URL actions fetch their page through it"
		}
	case jobspec.ProfilePDF:
		for _, prog := range []string{"qpdf", "exiftool"} {
			if _, err := exec.LookPath(prog); err != nil {
				return prog + " is not installed"
			}
		}
	}
	if p := s.pools[profile]; p != nil {
		if why := p.health(); why != "" {
			return "its sandboxes fail to start: " + why
		}
	}
	return ""
}

// Health reports whether a job of action name would be accepted now, with
// the most specific reason when not. On a cluster's HQ: a job of a tenant
// without workers of its own.
func (s *Service) Health(name string) apitype.ActionHealth {
	h, _, err := s.health(context.Background(), name, "")
	if err != nil {
		return apitype.ActionHealth{Name: name, Reason: WorkerUnavailable, Message: "the cluster's database did not answer: " + err.Error()}
	}
	return h
}

// health is Health for a job of tenant's (its ID), with the River queue
// the job goes to. err is set only when the cluster's database failed.
func (s *Service) health(ctx context.Context, name, tenant string) (_ apitype.ActionHealth, queue string, _ error) {
	a, ok := s.actions[name]
	if !ok {
		return apitype.ActionHealth{Name: name, Reason: ActionMissing, Hint: hints[ActionMissing],
			Message: fmt.Sprintf("no action %q is registered", name)}, "", nil
	}
	h := apitype.ActionHealth{Name: a.spec.Name, Version: a.spec.Version, Profile: a.spec.Profile, Base: a.spec.Base,
		Builtin: a.builtin, Description: a.spec.Description, Output: a.spec.Output, Extensions: a.spec.Inputs.Extensions,
		Options: a.optionList(), OptionsSchema: jobspec.OptionsSchema(a.spec.Base)}
	fail := func(reason, format string, args ...any) apitype.ActionHealth {
		h.Reason, h.Message, h.Hint = reason, fmt.Sprintf(format, args...), hints[reason]
		return h
	}
	if s.hq() {
		return s.clusterHealth(ctx, a, h, tenant)
	}
	if a.invalid != "" {
		return fail(ActionInvalid, "%s", a.invalid), "", nil
	}
	if !a.builtin {
		// Verified at load; checked again so a bundle changed since is
		// reported, while jobs keep using the snapshot loaded.
		if why := a.recheck(); why != "" {
			return fail(ActionInvalid, "%s", why), "", nil
		}
	}
	if !slices.Contains(profiles, a.spec.Profile) {
		return fail(ProfileMissing, "runtime profile %q is not defined", a.spec.Profile), "", nil
	}
	if a.runner != jobspec.RunnerAPI {
		return fail(VersionMismatch, "the action needs runner API %d; this Berth's runner speaks %d", a.runner, jobspec.RunnerAPI), "", nil
	}
	if b := s.bound(); b != nil {
		return fail(b.Reason, "%s", b.Message), "", nil
	}
	if reason, msg, hint := s.lockProblem(a, &h); reason != "" {
		h = fail(reason, "%s", msg)
		h.Hint = hint
		return h, "", nil
	}
	if why := s.profileProblem(a.spec.Profile); why != "" {
		return fail(ProfileUnhealthy, "profile %s is unhealthy: %s", a.spec.Profile, why), "", nil
	}
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !s.cfg.Workers || !started {
		return fail(WorkerUnavailable, "no queue consumer is running on this daemon"), "", nil
	}
	h.Available = true
	queue = river.QueueDefault
	if s.cfg.Cluster != nil {
		queue = Queue(a.spec.Profile, s.cfg.Cluster.Tenant)
	}
	return h, queue, nil
}

// clusterHealth is an action's health on a cluster's HQ: what HQ checks
// itself (the action is known, its runner API is this Berth's), then
// whether a live worker that takes tenant's jobs has the action available
// at the same version.
func (s *Service) clusterHealth(ctx context.Context, a *action, h apitype.ActionHealth, tenant string) (apitype.ActionHealth, string, error) {
	fail := func(reason, msg string) (apitype.ActionHealth, string, error) {
		h.Reason, h.Message, h.Hint = reason, msg, hints[reason]
		return h, "", nil
	}
	if a.invalid != "" {
		return fail(ActionInvalid, a.invalid)
	}
	if a.runner != jobspec.RunnerAPI {
		return fail(VersionMismatch, fmt.Sprintf("the action needs runner API %d; this Berth's runner speaks %d", a.runner, jobspec.RunnerAPI))
	}
	owner, err := s.cfg.Cluster.Route(ctx, tenant, a.spec.Name+"@"+a.spec.Version)
	var e *errcode.Error
	if errcode.Has(err, errcode.NoWorkerAvailable) && errors.As(err, &e) {
		h, q, _ := fail(WorkerUnavailable, e.Message)
		h.Hint = "start a worker that has it, or undrain one: berth workers ls shows each worker's status and berth actions on a worker why an action is unavailable there"
		return h, q, nil
	}
	if err != nil {
		return h, "", err
	}
	h.Available = true
	return h, Queue(a.spec.Profile, owner), nil
}

// Actions reports every registered action's health.
func (s *Service) Actions() []apitype.ActionHealth {
	names := slices.Sorted(maps.Keys(s.actions))
	out := make([]apitype.ActionHealth, 0, len(names))
	for _, n := range names {
		out = append(out, s.Health(n))
	}
	return out
}

// healthError turns an unavailable action's health into the error a
// refused job gets.
func healthError(h apitype.ActionHealth) error {
	msg := h.Message
	if h.Hint != "" {
		msg += " (" + h.Hint + ")"
	}
	r, ok := errcode.Named(h.Reason)
	if !ok {
		return errcode.New(errcode.Unavailable, "action %s is unavailable: %s", h.Name, msg)
	}
	return r.New("action %s is unavailable: %s", h.Name, msg)
}

// Principal is who submits or reads jobs: the tenant (whose jobs it sees)
// and the end user it acts for (capacity is counted per user too).
type Principal struct {
	Tenant, User string
	Admin        bool // sees every tenant's jobs
}

// PutFile stores an uploaded input that tenant may then read and name.
func (s *Service) PutFile(ctx context.Context, tenant string, r interface{ Read([]byte) (int, error) }, name string) (apitype.FileRef, error) {
	if name != "" {
		if err := jobspec.CheckName(name); err != nil {
			return apitype.FileRef{}, errcode.InvalidFields(map[string]string{"name": err.Error()})
		}
	}
	ref, err := s.blobs.Put(ctx, r, MaxInputBytes, name)
	if err != nil {
		return ref, err
	}
	return ref, s.store.AddBlobOwner(ctx, tenant, ref.SHA256)
}

// File returns the reference of stored file sha if who may read it; any
// other answers as a file that does not exist.
func (s *Service) File(ctx context.Context, who Principal, sha string) (apitype.FileRef, error) {
	sha = strings.ToLower(sha)
	ref, err := s.blobs.Ref(ctx, sha)
	if err != nil || who.Admin {
		return ref, err
	}
	if ok, err := s.store.BlobOwned(ctx, who.Tenant, sha); err != nil {
		return apitype.FileRef{}, err
	} else if !ok {
		return apitype.FileRef{}, errcode.FileNotFound.New("file %q not found", sha)
	}
	return ref, nil
}

// Submit validates a job request, checks the action's health, and queues
// the job; a repeat of an earlier request (same business_id and request)
// returns that job with repeat true.
func (s *Service) Submit(ctx context.Context, who Principal, req apitype.CreateJobRequest) (_ *Job, repeat bool, _ error) {
	// Health first: a job that cannot run now is refused for that, with
	// the reason the health API gives, before its inputs are looked at.
	h, queue, err := s.health(ctx, req.Action, who.Tenant)
	if err != nil {
		return nil, false, err
	}
	if !h.Available {
		return nil, false, healthError(h)
	}
	a := s.actions[req.Action]
	if req.Version != "" && req.Version != a.spec.Version {
		return nil, false, errcode.VersionMismatch.New("action %s is version %s on this daemon, not %s (%s)",
			a.spec.Name, a.spec.Version, req.Version, hintVersion)
	}
	problems := map[string]string{}
	if req.BusinessID != "" && (len(req.BusinessID) > 200 || strings.ContainsAny(req.BusinessID, "\x00\n\r")) {
		problems["business_id"] = "at most 200 bytes, no control characters"
	}
	if req.User != "" {
		who.User = req.User
	}
	if len(who.User) > 200 || strings.ContainsAny(who.User, "\x00\n\r") {
		problems["user"] = "at most 200 bytes, no control characters"
	}
	// Options: the bundle's defaults, overridden by the request's.
	opts, err := mergeOptions(a.options, req.Options)
	if err != nil {
		problems["options"] = err.Error()
	}
	parsed, err := jobspec.ParseOptions(opts)
	if err != nil {
		problems["options"] = err.Error()
	} else {
		maps.Copy(problems, parsed.Validate(a.spec.Base))
	}
	takesInputs := a.spec.Inputs.MaxFiles > 0
	if len(req.Inputs) == 0 && takesInputs {
		problems["inputs"] = "at least one input is required"
	}
	if len(req.Inputs) > 0 && !takesInputs {
		problems["inputs"] = a.spec.Name + " takes no inputs: its page is options.url"
	}
	if takesInputs && len(req.Inputs) > min(MaxInputs, a.spec.Inputs.MaxFiles) {
		problems["inputs"] = fmt.Sprintf("at most %d inputs for %s", min(MaxInputs, a.spec.Inputs.MaxFiles), a.spec.Name)
	}
	for name, in := range req.Inputs {
		if err := jobspec.CheckName(name); err != nil {
			problems["inputs."+name] = err.Error()
		} else if _, clash := a.files[name]; clash {
			problems["inputs."+name] = "is a file of the action's bundle"
		}
		if n := countSet(in.ContentBase64, in.SHA256, in.Sandbox+in.Path); n != 1 {
			problems["inputs."+name] = "give exactly one of content_base64, sha256, and sandbox with path"
		} else if why := checkWorkspaceRef(in.Sandbox, in.Path, false); why != "" {
			problems["inputs."+name] = why
		}
	}
	if len(problems) == 0 && takesInputs {
		if main := mainInput(a, parsed, req.Inputs); main == "" {
			problems["inputs"] = fmt.Sprintf("%s needs a main input with one of %s (or options.main naming one)",
				a.spec.Name, strings.Join(a.spec.Inputs.Extensions, ", "))
		}
	}
	if req.Output != nil {
		if why := checkWorkspaceRef(req.Output.Sandbox, req.Output.Path, true); why != "" {
			problems["output"] = why
		}
	}
	if len(problems) > 0 {
		return nil, false, errcode.InvalidFields(problems)
	}
	// The workspaces named must be the principal's (another tenant's
	// sandbox is one that does not exist), before anything is stored. On
	// a cluster's HQ, a job writing into one runs on its worker.
	if req.Output != nil && s.hq() {
		worker, err := s.cfg.Cluster.SandboxWorker(ctx, who, req.Output.Sandbox, a.spec.Name+"@"+a.spec.Version)
		if err != nil {
			return nil, false, err
		}
		queue = WorkerQueue(a.spec.Profile, worker)
	} else if req.Output != nil {
		if err := s.workspaceSandbox(ctx, who, req.Output.Sandbox); err != nil {
			return nil, false, err
		}
	}
	// Store the inputs (inline ones now; uploaded ones must exist).
	var refs []apitype.FileRef
	var total int64
	for _, name := range slices.Sorted(maps.Keys(req.Inputs)) {
		in := req.Inputs[name]
		var ref apitype.FileRef
		if in.Sandbox != "" {
			ref, err = s.readWorkspace(ctx, who, name, in)
		} else if in.SHA256 != "" {
			ref, err = s.File(ctx, who, in.SHA256)
			if err == nil {
				// Touch it, so the sweeper spares it until the job names it.
				err = s.store.PutBlob(ctx, Blob{SHA256: ref.SHA256, Size: ref.Size, MIME: ref.MIME, CreatedAt: time.Now().UTC()})
			}
		} else {
			var b []byte
			b, err = base64.StdEncoding.DecodeString(in.ContentBase64)
			if err != nil {
				return nil, false, errcode.InvalidFields(map[string]string{"inputs." + name + ".content_base64": "is not base64"})
			}
			ref, err = s.blobs.Put(ctx, bytes.NewReader(b), MaxInputBytes, name)
			if err == nil {
				err = s.store.AddBlobOwner(ctx, who.Tenant, ref.SHA256)
			}
		}
		if err != nil {
			return nil, false, err
		}
		ref.Name = name
		ref.MIME = DetectMIME(name, nil)
		if ref.MIME == "application/octet-stream" || ref.MIME == "" {
			if rec, err := s.store.GetBlob(ctx, ref.SHA256); err == nil {
				ref.MIME = rec.MIME
			}
		}
		total += ref.Size
		refs = append(refs, ref)
	}
	if total > MaxInputBytes {
		return nil, false, errcode.InputsTooLarge.New("the inputs come to %d bytes; at most %d", total, MaxInputBytes)
	}
	digest := requestDigest(a, opts, refs, req.Output)
	if req.BusinessID != "" {
		if j, err := s.store.JobByBusinessID(ctx, who.Tenant, req.BusinessID); err == nil {
			return s.repeat(j, digest)
		}
	}
	now := time.Now().UTC()
	j := &Job{ID: ident.New("job_"), Action: a.spec.Name, ActionVersion: a.spec.Version, State: apitype.JobQueued,
		Tenant: who.Tenant, Owner: who.User, BusinessID: req.BusinessID, RequestSHA256: digest, Inputs: refs,
		Output: req.Output, Options: opts, MaxAttempts: s.cfg.MaxAttempts, CreatedAt: now, UpdatedAt: now}
	err = s.store.InsertJob(ctx, j, apitype.JobEvent{Type: apitype.JobQueued, At: now})
	if errcode.Has(err, errcode.BusinessIDTaken) {
		if prev, gerr := s.store.JobByBusinessID(ctx, who.Tenant, req.BusinessID); gerr == nil {
			return s.repeat(prev, digest)
		}
	}
	if err != nil {
		return nil, false, err
	}
	// Queue it. The queue job claims the row when it runs (river_id is 0
	// until then). Were the daemon to die right here, recovery queues every
	// queued job no queue job has claimed; a second queue job for the same
	// row finds it claimed and does nothing.
	if _, err := s.river.Insert(ctx, runArgs{JobID: j.ID}, &river.InsertOpts{Queue: queue}); err != nil {
		_, _ = s.change(context.WithoutCancel(ctx), j.ID, Change{From: []string{apitype.JobQueued}, To: apitype.JobFailed,
			Error: &apitype.JobError{Code: string(errcode.Unavailable), Reason: "queue_unavailable", Message: "queueing the job failed", Retryable: true}})
		return nil, false, errcode.Wrap(errcode.Unavailable, err, "queueing the job failed")
	}
	s.log.InfoContext(ctx, "job queued", "job_id", j.ID, "action", j.Action, "tenant", j.Tenant)
	return j, false, nil
}

// repeat answers a request whose business_id names an earlier job.
func (s *Service) repeat(j *Job, digest string) (*Job, bool, error) {
	if j.RequestSHA256 != digest {
		return nil, false, errcode.BusinessIDConflict.New("business_id %q names job %s, made from other inputs or options", j.BusinessID, j.ID)
	}
	return j, true, nil
}

// mainInput returns the input an action renders: options.main, the
// action's main name, or the only input with a fitting extension.
func mainInput(a *action, o jobspec.Options, inputs map[string]apitype.JobInput) string {
	has := func(n string) bool {
		_, in := inputs[n]
		_, bundled := a.files[n]
		return in || bundled
	}
	if o.Main != "" {
		if has(o.Main) {
			return o.Main
		}
		return ""
	}
	if m := a.spec.Inputs.Main; m != "" && has(m) {
		return m
	}
	var fit []string
	for n := range inputs {
		if slices.Contains(a.spec.Inputs.Extensions, strings.ToLower(filepath.Ext(n))) {
			fit = append(fit, n)
		}
	}
	for n := range a.files {
		if slices.Contains(a.spec.Inputs.Extensions, strings.ToLower(filepath.Ext(n))) {
			fit = append(fit, n)
		}
	}
	if len(fit) == 1 {
		return fit[0]
	}
	if len(fit) > 1 && a.spec.Profile == jobspec.ProfilePDF {
		// The PDF engines take every input; the first is as good a main as any.
		slices.Sort(fit)
		return fit[0]
	}
	return ""
}

// mergeOptions overlays the request's options on a bundle's defaults.
func mergeOptions(defaults, req json.RawMessage) (json.RawMessage, error) {
	if len(defaults) == 0 {
		return req, nil
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(defaults, &m); err != nil {
		return nil, err
	}
	if len(req) > 0 && string(req) != "null" {
		over := map[string]json.RawMessage{}
		if err := json.Unmarshal(req, &over); err != nil {
			return nil, fmt.Errorf("must be a JSON object")
		}
		maps.Copy(m, over)
	}
	return json.Marshal(m)
}

// requestDigest identifies a request: action and version, options and
// every input's name and content.
func requestDigest(a *action, opts json.RawMessage, refs []apitype.FileRef, dest *apitype.WorkspaceRef) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", a.spec.Name, a.spec.Version)
	if len(opts) > 0 {
		var v any
		if json.Unmarshal(opts, &v) == nil {
			canon, _ := json.Marshal(v) // maps marshal with sorted keys
			h.Write(canon)
		}
	}
	h.Write([]byte{0})
	for _, r := range refs {
		fmt.Fprintf(h, "%s\x00%s\x00", r.Name, r.SHA256)
	}
	if dest != nil {
		fmt.Fprintf(h, "output\x00%s\x00%s\x00", dest.Sandbox, dest.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Get returns a job the principal may see.
func (s *Service) Get(ctx context.Context, who Principal, id string) (*Job, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if !who.Admin && j.Tenant != who.Tenant {
		return nil, errcode.JobNotFound.New("job %q not found", id)
	}
	return j, nil
}

// List lists the principal's tenant's jobs (every job for an admin).
func (s *Service) List(ctx context.Context, who Principal, f Filter) ([]*Job, error) {
	if !who.Admin {
		f.Tenant = who.Tenant
	}
	return s.store.ListJobs(ctx, f)
}

// Events returns a job's events after seq.
func (s *Service) Events(ctx context.Context, id string, after int64) ([]apitype.JobEvent, error) {
	return s.store.JobEvents(ctx, id, after)
}

// Subscribe returns a channel poked whenever the job has a new event.
func (s *Service) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.subs[id] == nil {
		s.subs[id] = map[chan struct{}]bool{}
	}
	s.subs[id][ch] = true
	s.mu.Unlock()
	stop := make(chan struct{})
	if s.cfg.Cluster != nil {
		// Another node (a worker, HQ) changes the job: look now and then.
		go func() {
			t := time.NewTicker(ClusterPoll)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return ch, func() {
		close(stop)
		s.mu.Lock()
		delete(s.subs[id], ch)
		if len(s.subs[id]) == 0 {
			delete(s.subs, id)
		}
		s.mu.Unlock()
	}
}

// ClusterPoll is how often a cluster's node looks for changes of a job
// that it waits on or streams the events of.
const ClusterPoll = 200 * time.Millisecond

// change applies a change and pokes the job's subscribers.
func (s *Service) change(ctx context.Context, id string, c Change) (*Job, error) {
	j, err := s.store.ChangeJob(ctx, id, c)
	if err != nil {
		return nil, err
	}
	if c.To != "" && apitype.JobTerminal(c.To) {
		s.metrics.finish(j)
	}
	s.logChange(ctx, j, c)
	s.mu.Lock()
	for ch := range s.subs[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	return j, nil
}

// logChange tells the operator how a job ended, or that an attempt
// failed and is retried.
func (s *Service) logChange(ctx context.Context, j *Job, c Change) {
	jerr := j.Error
	if c.To == apitype.JobQueued {
		jerr = c.Event.Error
	}
	attrs := []any{"job_id", j.ID, "action", j.Action, "attempt", j.Attempt}
	if jerr != nil {
		attrs = append(attrs, "reason", jerr.Reason, "err", jerr.Message)
	}
	switch {
	case c.To == apitype.JobSucceeded:
		s.log.InfoContext(ctx, "job succeeded", attrs...)
	case c.To == apitype.JobCanceled:
		s.log.InfoContext(ctx, "job canceled", attrs...)
	case c.To == apitype.JobFailed:
		s.log.WarnContext(ctx, "job failed", attrs...)
	case c.To == apitype.JobQueued && c.Event.Error != nil:
		s.log.WarnContext(ctx, "job attempt failed; retrying", attrs...)
	}
}

// Wait waits until the job is finished or ctx ends.
func (s *Service) Wait(ctx context.Context, id string) (*Job, error) {
	poke, done := s.Subscribe(id)
	defer done()
	for {
		j, err := s.store.GetJob(ctx, id)
		if err != nil || apitype.JobTerminal(j.State) {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-poke:
		}
	}
}

// Cancel cancels a job: a queued or waiting one is canceled at once and
// leaves the queue; a starting or running one has its sandbox killed and
// is canceled when its work returns. Canceling a canceled job is a no-op;
// a finished one is a conflict.
func (s *Service) Cancel(ctx context.Context, who Principal, id string) (*Job, error) {
	j, err := s.Get(ctx, who, id)
	if err != nil {
		return nil, err
	}
	tries := 0
	for {
		switch j.State {
		case apitype.JobCanceled:
			return j, nil
		case apitype.JobSucceeded, apitype.JobFailed:
			return nil, errcode.JobFinished.New("job %s already %s", id, j.State)
		case apitype.JobQueued, apitype.JobWaiting:
			nj, err := s.change(ctx, id, Change{From: []string{apitype.JobQueued, apitype.JobWaiting}, To: apitype.JobCanceled,
				Event: apitype.JobEvent{Message: "canceled before it started"}})
			if errcode.Has(err, errcode.JobState) {
				j, err = s.store.GetJob(ctx, id)
				if err != nil {
					return nil, err
				}
				continue // it moved on: look again
			}
			if err != nil {
				return nil, err
			}
			if j.RiverID != 0 {
				if _, err := s.river.JobCancel(ctx, j.RiverID); err != nil && !errors.Is(err, river.ErrNotFound) {
					s.log.Warn("removing a canceled job from the queue", "job_id", id, "err", err)
				}
			}
			return nj, nil
		default: // starting, running
			s.mu.Lock()
			cancel := s.running[id]
			s.mu.Unlock()
			if c := s.cfg.Cluster; cancel == nil && c != nil && j.Worker != c.Worker && j.RiverID != 0 {
				// Its attempt runs on another worker: River tells that
				// worker's consumer, whose work ends and records the
				// cancel. Look again once it has moved on (canceled, or
				// queued again if that worker was lost).
				if _, err := s.river.JobCancel(ctx, j.RiverID); err != nil && !errors.Is(err, river.ErrNotFound) {
					return nil, err
				}
				if j, err = s.settled(ctx, id); err != nil {
					return nil, err
				}
				continue
			}
			if cancel == nil {
				// Between the states: its work has just ended, or the
				// daemon is stopping (the next start requeues it). Look
				// again shortly, for a while.
				if tries++; tries > 200 || ctx.Err() != nil {
					return nil, errcode.JobBusy.New("job %s is %s and not running here; try again", id, j.State)
				}
				time.Sleep(10 * time.Millisecond)
				if j, err = s.store.GetJob(ctx, id); err != nil {
					return nil, err
				}
				continue
			}
			cancel(errCanceled)
			return s.Wait(ctx, id)
		}
	}
}

var errCanceled = errors.New("canceled by request")

// settled waits until job id is neither starting nor running.
func (s *Service) settled(ctx context.Context, id string) (*Job, error) {
	poke, done := s.Subscribe(id)
	defer done()
	for {
		j, err := s.store.GetJob(ctx, id)
		if err != nil || (j.State != apitype.JobStarting && j.State != apitype.JobRunning) {
			return j, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poke:
		}
	}
}

// Info reports the pools, the job sandboxes and the active jobs.
func (s *Service) Info(ctx context.Context) apitype.JobsInfo {
	out := apitype.JobsInfo{Runtime: s.cfg.Runtime, Pools: []apitype.JobPoolInfo{}}
	for _, name := range profiles {
		p := s.pools[name]
		out.Pools = append(out.Pools, apitype.JobPoolInfo{Profile: name, Size: p.size, Ready: len(p.ready)})
	}
	if s.mgr == nil {
		// A cluster's HQ: the pools and sandboxes are the workers'.
		out.Pools = []apitype.JobPoolInfo{}
	} else if all, err := s.mgr.Internal(ctx, "job-"); err == nil {
		out.Sandboxes = len(all)
	}
	out.Active, _, _, _ = s.store.ActiveJobs(ctx, "", "")
	return out
}

func (f levelFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFilter{f.Handler.WithAttrs(attrs), f.min}
}

func (f levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{f.Handler.WithGroup(name), f.min}
}

// Running counts tenant's jobs starting or running.
func (s *Service) Running(ctx context.Context, tenant string) (int, error) {
	_, n, _, err := s.store.ActiveJobs(ctx, tenant, "")
	return n, err
}
