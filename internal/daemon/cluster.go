package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/tenant"
)

// Cluster roles (serve --role).
const (
	RoleHQ     = "hq"
	RoleWorker = "worker"
)

// ClusterConfig makes the daemon a cluster's HQ or one of its workers
// (internal/cluster, docs/operations.md).
type ClusterConfig struct {
	Role string
	// Database is the shared Postgres.
	Database string
	// ServiceTokenFile holds HQ's service secret (made if missing) or a
	// worker's credential.
	ServiceTokenFile string
	// HQ: the workers it places on, and when a silent one's resources are
	// reported lost.
	Workers   []cluster.WorkerConfig
	LostAfter time.Duration
	// Worker: its ID and HQ's public URL.
	WorkerID string
	HQURL    string
}

// runHQ runs a cluster's Headquarters: the public API over the shared
// database, forwarding what runs to the workers. It owns nothing that
// runs, so it has no sandbox manager, browsers or job queue.
func runHQ(ctx context.Context, cfg Config, dataDir string, log *slog.Logger) error {
	cc := cfg.Cluster
	secret, err := hqSecret(cc.ServiceTokenFile, log)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, cc.Database)
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := adminKeys(ctx, db, dataDir, log)
	if err != nil {
		return err
	}
	hq, err := cluster.NewHQ(cluster.HQConfig{Secret: secret, Workers: cc.Workers, Store: db, LostAfter: cc.LostAfter, Logger: log})
	if err != nil {
		return err
	}
	defer hq.Close()
	for _, w := range cc.Workers {
		log.Info("worker", "id", w.ID, "url", w.URL.String(), "tenant", w.Tenant)
	}
	pool, err := riverPool(ctx, cc.Database)
	if err != nil {
		return err
	}
	defer pool.Close()
	// HQ queues, reports and cancels jobs; the workers run them.
	jobSvc, err := jobs.New(jobs.Config{
		DataDir: dataDir, ActionsDir: cfg.ActionsDir, Retention: cfg.JobRetention, Logger: log, RiverPool: pool,
		Cluster: &jobs.Cluster{Route: func(ctx context.Context, tenantID, action string) (string, error) {
			name := "" // no tenant (Health for berth actions): the shared workers
			if tenantID != "" {
				t, err := db.GetTenant(ctx, tenantID)
				if err != nil && !errcode.Is(err, errcode.NotFound) {
					return "", err
				}
				if err == nil {
					name = t.Name
				}
			}
			dedicated, err := hq.JobRoute(ctx, name, action)
			if !dedicated {
				name = ""
			}
			return name, err
		},
			ReadWorkspace: func(ctx context.Context, who jobs.Principal, sandbox, path string) (io.ReadCloser, error) {
				ws, err := hq.SandboxWorker(ctx, who.Tenant, who.Admin, sandbox, "")
				if err != nil {
					return nil, err
				}
				caller, err := jobCaller(ctx, db, who)
				if err != nil {
					return nil, err
				}
				return hq.Open(ctx, ws.WorkerConfig, caller, cluster.Call{Method: http.MethodGet,
					URI: "/v1/sandboxes/" + url.PathEscape(sandbox) + "/files/content?" + url.Values{"path": {path}}.Encode()})
			},
			SandboxWorker: func(ctx context.Context, who jobs.Principal, sandbox, action string) (string, error) {
				ws, err := hq.SandboxWorker(ctx, who.Tenant, who.Admin, sandbox, action)
				return ws.ID, err
			},
		},
	}, db, nil, nil)
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{
		Version: cfg.Version, DataDir: dataDir, MaxUpload: cfg.MaxUpload, Logger: log, Keys: keys, DB: db, Jobs: jobSvc,
		PreviewDomain: strings.ToLower(strings.Trim(cfg.PreviewDomain, ".")),
		Tenants:       db, DefaultTenant: tenant.DefaultID, Audit: db, Idempotency: db, RateLimits: cfg.RateLimits,
		StationID: cfg.StationID, Dashboard: dashboardOf(cfg.Dashboard, log), Cluster: hq,
		DBUnavailable: store.IsUnavailable,
	})
	defer api.Close()
	revocations, stop := context.WithCancel(context.Background())
	defer stop()
	go keys.PollRevocations(revocations, log)
	go sweepIdempotency(revocations, db, log)
	go maintain(revocations, hq, jobSvc, log)
	jobsPart := part{name: "jobs", start: jobSvc.Start, stop: jobSvc.Stop, stopTimeout: 30 * time.Second}
	return serveAPI(ctx, cfg, dataDir, api, log, jobsPart)
}

// jobCaller is who, a job's submitter, as HQ's caller on a worker: an
// admin, or its tenant's key with the execution scope a submit needs.
func jobCaller(ctx context.Context, db *store.DB, who jobs.Principal) (cluster.Caller, error) {
	if who.Admin {
		return cluster.Caller{Principal: auth.Principal{KeyID: who.User, Scope: auth.ScopeAdmin}}, nil
	}
	t, err := db.GetTenant(ctx, who.Tenant)
	if err != nil {
		return cluster.Caller{}, err
	}
	return cluster.Caller{Principal: auth.Principal{KeyID: who.User, Scope: auth.ScopeExecution, Tenant: who.Tenant}, TenantName: t.Name}, nil
}

// maintain is HQ's housekeeping, every RescueEvery: the job service's
// Rescue (the attempts of workers whose lease ran out are queued again for
// another), and the deletes of resources forgotten while their worker was
// lost, on those that answer again. Leases are judged only once the
// database has answered HQ for a lease's length: after an outage every
// worker's lease looks run out until its next heartbeat.
func maintain(ctx context.Context, hq *cluster.HQ, svc *jobs.Service, log *slog.Logger) {
	var answering time.Time
	t := time.NewTicker(RescueEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		all, err := hq.Statuses(ctx)
		if err != nil {
			answering = time.Time{}
			continue
		}
		if answering.IsZero() {
			answering = time.Now()
		}
		if time.Since(answering) < cluster.LeaseTTL {
			continue
		}
		reachable := map[string]bool{}
		for _, ws := range all {
			reachable[ws.ID] = ws.Reachable()
		}
		if err := svc.Rescue(ctx, func(w string) bool { return reachable[w] }, QueuedGrace); err != nil {
			log.Warn("rescuing jobs", "err", err)
		}
		if err := hq.FinishLostDeletes(ctx); err != nil {
			log.Warn("deleting what was deleted while its worker was lost", "err", err)
		}
	}
}

// RescueEvery is how often HQ looks for lost workers' jobs; QueuedGrace
// how old a queued job without a queue job must be to get one.
const (
	RescueEvery = 2 * time.Second
	QueuedGrace = 30 * time.Second
)

// hqSecret reads HQ's service secret, making it (0600) on first start.
func hqSecret(path string, log *slog.Logger) ([]byte, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(path, []byte(cluster.NewSecret()+"\n")); err != nil {
			return nil, fmt.Errorf("making the service secret %s: %w", path, err)
		}
		log.Info("created HQ's service secret; make each worker's credential with berth workers credential", "path", path)
	}
	return cluster.ReadSecret(path)
}

// serveAPI starts before, then serves HQ's api on cfg.Listen until ctx
// ends.
func serveAPI(ctx context.Context, cfg Config, dataDir string, api http.Handler, log *slog.Logger, before ...part) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	serve, served := apiPart(ctx, ln, api, log)
	ps := &parts{log: log}
	if err := ps.start(ctx, append(before, serve)...); err != nil {
		ln.Close()
		return err
	}
	return serveUntilDone(ctx, cfg, dataDir, ln.Addr().String(), ps, served, log)
}

// workerSide is what a worker adds to a daemon: the shared database, its
// credential's verifier and its lease.
type workerSide struct {
	id       string
	db       *store.DB
	verifier *cluster.Verifier
	tenantID string // HQ's ID of the tenant it is bound to
}

// openWorker connects a worker to the cluster: the shared database, its
// credential, and the tenant it serves mirrored into its own database with
// HQ's ID (the tenant must exist on HQ first).
func openWorker(ctx context.Context, cc *ClusterConfig, boundTenant string, local *store.DB) (*workerSide, error) {
	cred, err := cluster.ReadSecret(cc.ServiceTokenFile)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, cc.Database)
	if err != nil {
		return nil, err
	}
	ws := &workerSide{id: cc.WorkerID, db: db, verifier: cluster.NewVerifier(cc.WorkerID, cred)}
	if boundTenant != "" {
		t, err := db.GetTenant(ctx, boundTenant)
		if errcode.Is(err, errcode.NotFound) {
			err = errcode.TenantNotFound.New("--tenant %s: the cluster has no such tenant; make it on HQ first (berth tenant create %s)", boundTenant, boundTenant)
		}
		if err == nil {
			err = mirrorTenant(ctx, local, t)
		}
		if err != nil {
			db.Close()
			return nil, err
		}
		ws.tenantID = t.ID
	}
	return ws, nil
}

// mirrorTenant makes the cluster's tenant t known to the worker's own
// database under the same ID.
func mirrorTenant(ctx context.Context, local *store.DB, t *tenant.Tenant) error {
	have, err := local.GetTenant(ctx, t.Name)
	switch {
	case errcode.Is(err, errcode.NotFound):
		return local.CreateTenant(ctx, t)
	case err != nil:
		return err
	case have.ID != t.ID:
		return errcode.TenantBound.New("this worker's data directory holds another tenant named %q (%s, the cluster's is %s); use a new data directory", t.Name, have.ID, t.ID)
	}
	return nil
}

// draining reports whether HQ drains the worker (false when the database
// does not answer: the worker goes on with what it was given).
func (ws *workerSide) draining(ctx context.Context) bool {
	leases, err := ws.db.ListLeases(ctx)
	if err != nil {
		return false
	}
	for _, l := range leases {
		if l.ID == ws.id {
			return l.Draining
		}
	}
	return false
}

// riverPool is a pgx pool on the cluster's database for River's queue.
func riverPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, errcode.DatabaseUnavailable.Wrap(err, "opening the job queue's pool on the cluster's database")
	}
	return pool, nil
}

// member is the worker's lease, advertising what it has and runs.
func (ws *workerSide) member(cc *ClusterConfig, cfg Config, mgr *sandbox.Manager, browsers *browser.Manager, jobSvc *jobs.Service, log *slog.Logger) part {
	describe := func(ctx context.Context) (cluster.Capabilities, cluster.Load) {
		mc := mgr.Config()
		caps := cluster.Capabilities{Tenant: cfg.Tenant, MaxSandboxes: mc.MaxSandboxes, Version: cfg.Version, Runtimes: []string{}}
		for _, rt := range mgr.Runtimes() {
			if rt.Available() != nil || (cfg.TenantMode && !rt.Isolated()) {
				continue // tenant mode refuses what is not isolated
			}
			if rt.Name() == mc.DefaultRuntime {
				caps.Runtimes = append([]string{rt.Name()}, caps.Runtimes...)
			} else {
				caps.Runtimes = append(caps.Runtimes, rt.Name())
			}
		}
		if tpls, err := mgr.Templates(ctx, sandbox.AnyTenant); err == nil {
			for _, t := range tpls {
				if t.State == apitype.TemplateReady && t.Name != sandbox.BaseTemplate {
					caps.Templates = append(caps.Templates, cluster.TemplateKey(t.Tenant, t.Name))
				}
			}
		}
		for _, h := range jobSvc.Actions() {
			if h.Available {
				caps.Actions = append(caps.Actions, h.Name+"@"+h.Version)
			}
		}
		var load cluster.Load
		if browsers.Available() == nil {
			caps.Browser, caps.MaxBrowserSessions = true, browsers.Config().MaxSessions
			load.BrowserSessions = len(browsers.List())
		}
		if counts, err := mgr.Count(ctx); err == nil {
			for _, n := range counts {
				load.Sandboxes += n
			}
		}
		return caps, load
	}
	m := cluster.NewMember(cc.WorkerID, ws.db, describe, log)
	done := make(chan struct{})
	var cancel context.CancelFunc
	return part{name: "membership", stopTimeout: 10 * time.Second,
		start: func(ctx context.Context) error {
			if err := m.Beat(ctx); err != nil {
				return errcode.DatabaseUnavailable.Wrap(err, "writing worker %s's first lease to the cluster's database", cc.WorkerID)
			}
			log.Info("worker joined the cluster", "worker", cc.WorkerID, "incarnation", m.Incarnation, "hq", cc.HQURL)
			var rctx context.Context
			rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
			go func() { defer close(done); m.Run(rctx) }()
			return nil
		},
		stop: func(context.Context) error {
			cancel()
			<-done
			return nil
		},
	}
}
