package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/dashboard"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/ratelimit"
	"github.com/berthdev/berth/internal/sandbox"
)

func (a *app) serveCommand() *cobra.Command {
	var (
		listen, logFormat, logLevel           string
		defaultRuntime, ociRuntime, runsc     string
		uidRegistry                           string
		previewDomain                         string
		warmPools                             []string
		chromium                              string
		maxBrowserSessions, warmContexts      int
		browserIdle                           time.Duration
		providers                             providerFlags
		browserIsolatedRuntime                string
		browserIsolatedWarm                   int
		browserJournalEntries                 int
		maxSandboxes, maxCommands, maxHistory int
		commandTimeout, maxCommandTimeout     time.Duration
		outputCap, maxUpload                  = sizeValue(agent.DefaultOutputCap), sizeValue(agent.DefaultMaxUpload)
		jobsRuntime, actionsDir, soffice      string
		jobWorkers, allowEmptyDatabase        bool
		jobReuse                              int
		jobRetention                          time.Duration
		jobPools, jobMemory                   []string
		jobCap                                = jobs.DefaultCapacity
		egress                                daemon.EgressConfig
		egressOn                              bool
		tenantMode                            bool
		boundTenant                           string
		stationID                             string
		rates                                 = httpapi.DefaultRateLimits
		trustedProxies                        []string
		dashboardOn, insecureCookies          bool
		role, database, workerID, hqURL       string
		serviceTokenFile                      string
		workerFlags                           []string
		workerLostAfter                       time.Duration
	)
	recording := &browser.RecordingConfig{} // browser_record.go
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Berth daemon",
		Long: `Run the Berth daemon with embedded defaults: SQLite in the data directory and
sandboxes on this machine. Every flag has a BERTH_* environment equivalent
(--max-upload is BERTH_MAX_UPLOAD). SIGTERM or SIGINT shut it down gracefully;
sandboxes keep running and are re-adopted by the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.bindEnv(cmd.Flags()); err != nil {
				return err
			}
			log, err := newLogger(a.stderr, logFormat, logLevel)
			if err != nil {
				return usageError{err}
			}
			var pools []sandbox.PoolSpec
			for _, w := range warmPools {
				p, err := sandbox.ParsePoolSpec(w)
				if err != nil {
					return usageError{fmt.Errorf("--warm-pool: %w", err)}
				}
				pools = append(pools, p)
			}
			jp := maps.Clone(jobs.DefaultPools)
			for _, p := range jobPools {
				name, n, ok := strings.Cut(p, "=")
				size, err := strconv.Atoi(n)
				if _, known := jp[name]; !ok || !known || err != nil || size < 0 || size > 64 {
					return usageError{fmt.Errorf("--job-pool %q: want PROFILE=N with PROFILE browser, office, pdf or web and N 0-64", p)}
				}
				jp[name] = size
			}
			profiles := map[string]jobs.Profile{}
			for _, m := range jobMemory {
				name, n, ok := strings.Cut(m, "=")
				mb, err := strconv.ParseInt(n, 10, 64)
				if _, known := jp[name]; !ok || !known || err != nil || mb < jobs.MinMemoryMB || mb > sandbox.MaxResources.MemoryMB {
					return usageError{fmt.Errorf("--job-memory %q: want PROFILE=MB with PROFILE browser, office, pdf or web and MB %d-%d",
						m, jobs.MinMemoryMB, sandbox.MaxResources.MemoryMB)}
				}
				profiles[name] = jobs.DefaultProfile(name).WithMemory(mb)
			}
			egress.Disabled = !egressOn
			proxies, err := ratelimit.ParseTrusted(trustedProxies)
			if err != nil {
				return usageError{fmt.Errorf("--trusted-proxy: %w", err)}
			}
			rates.TrustedProxies = proxies
			browserProviders, err := providers.build()
			if err != nil {
				return usageError{err}
			}
			if browserJournalEntries < 1 || browserJournalEntries > browser.MaxJournalEntries {
				return usageError{fmt.Errorf("--browser-journal-entries must be 1-%d", browser.MaxJournalEntries)}
			}
			if browserIsolatedWarm < 0 || browserIsolatedWarm > 16 {
				return usageError{fmt.Errorf("--browser-isolated-warm must be 0-16")}
			}
			if !httpapi.ValidStationID(stationID) {
				return usageError{fmt.Errorf("--station-id must be 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit")}
			}
			if jobReuse < 1 || jobReuse > 1000 {
				return usageError{fmt.Errorf("--job-runtime-reuse must be 1-1000")}
			}
			if jobCap.Global < 1 || jobCap.Tenant < 1 || jobCap.User < 1 {
				return usageError{fmt.Errorf("--jobs-max, --jobs-max-per-tenant and --jobs-max-per-user must be at least 1")}
			}
			clusterCfg, err := clusterConfig(role, database, workerID, hqURL, serviceTokenFile, workerFlags, workerLostAfter, boundTenant)
			if err != nil {
				return usageError{err}
			}
			return daemon.Run(cmd.Context(), daemon.Config{
				Cluster: clusterCfg,
				DataDir: a.dataDir(), Listen: listen, Version: version,
				MaxSandboxes: maxSandboxes, MaxCommands: maxCommands, MaxHistory: maxHistory,
				OutputCap: int64(outputCap), MaxUpload: int64(maxUpload),
				DefaultTimeout: commandTimeout, MaxTimeout: maxCommandTimeout,
				DefaultRuntime: defaultRuntime, OCIRuntime: ociRuntime, Runsc: runsc, UIDRegistry: uidRegistry,
				PreviewDomain: previewDomain, WarmPools: pools,
				Chromium: chromium, MaxBrowserSessions: maxBrowserSessions, BrowserWarmContexts: warmContexts, BrowserIdleTimeout: browserIdle, BrowserProviders: browserProviders,
				BrowserIsolatedRuntime: browserIsolatedRuntime, BrowserIsolatedWarm: browserIsolatedWarm,
				BrowserJournalEntries: browserJournalEntries, Logger: log, BrowserRecordings: *recording,
				JobsRuntime: jobsRuntime, NoJobWorkers: !jobWorkers, JobCapacity: jobCap, JobPools: jp, JobProfiles: profiles,
				ActionsDir: actionsDir, JobChromium: chromium, Soffice: soffice, JobReuse: jobReuse,
				JobRetention: jobRetention, AllowEmptyDatabase: allowEmptyDatabase, Egress: egress,
				TenantMode: tenantMode, Tenant: boundTenant, RateLimits: &rates, StationID: stationID,
				Dashboard: dashboard.Config{Off: !dashboardOn, InsecureCookies: insecureCookies},
				Ready: func(addr string) {
					switch {
					case logFormat != "text":
					case role == daemon.RoleWorker:
						fmt.Fprintf(a.stderr, "\nberth worker %s is serving HQ on http://%s; clients use HQ (%s), not this address.\n\n", workerID, addr, cmp.Or(hqURL, "its --hq"))
					default:
						a.printNextSteps(addr, dashboardOn)
					}
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7070", "address to serve the API on")
	f.StringVar(&defaultRuntime, "default-runtime", "", "runtime of sandboxes that name none (default: container when available, else process)")
	f.StringVar(&ociRuntime, "oci-runtime", "auto", "program of the container runtime: auto, crun or runc")
	f.StringVar(&runsc, "runsc", "", "path of gVisor's runsc (default: found on PATH)")
	f.StringVar(&uidRegistry, "uid-registry", sandbox.DefaultUIDRegistry,
		"host-wide file leasing sandbox uids to every daemon of this host (keep one per host, outside data directories)")
	f.StringVar(&previewDomain, "preview-domain", "localhost",
		"serve sandbox ports at http://{port}-{sandbox}.DOMAIN (point *.DOMAIN at this daemon; \"\" turns it off)")
	f.StringArrayVar(&warmPools, "warm-pool", nil,
		"keep N sandboxes of TEMPLATE started ahead of demand, as TEMPLATE=N (repeatable; the built-in template is base)")
	f.StringVar(&chromium, "chromium", "", "Chromium binary of browser sessions (default: chromium-headless-shell, else chromium, on PATH)")
	f.IntVar(&maxBrowserSessions, "max-browser-sessions", browser.DefaultMaxSessions, "most browser sessions open at once")
	f.IntVar(&warmContexts, "browser-warm-contexts", 0, "spare browser contexts kept ready in the shared Chromium (0: the default; -1: none, and Chromium starts with the first session)")
	f.DurationVar(&browserIdle, "browser-idle-timeout", browser.DefaultIdleTimeout, "close a browser session after this long without an action")
	providers.register(f)
	f.StringVar(&browserIsolatedRuntime, "browser-isolated-runtime", "container", "runtime of isolated browser sessions' sandboxes: container or gvisor")
	f.IntVar(&browserIsolatedWarm, "browser-isolated-warm", 1, "isolated browsers (a sandbox with Chromium up) kept started ahead of demand (0: none)")
	f.IntVar(&browserJournalEntries, "browser-journal-entries", browser.DefaultJournalEntries,
		fmt.Sprintf("latest actions kept in each browser session's journal (at most %d)", browser.MaxJournalEntries))
	addRecordingFlags(f, recording)
	f.StringVar(&jobsRuntime, "jobs-runtime", "container", "runtime of job sandboxes: container, gvisor or none (jobs off)")
	f.BoolVar(&allowEmptyDatabase, "allow-empty-database", false,
		"start even if the database is empty while sandbox directories exist (they are quarantined, not removed)")
	f.BoolVar(&jobWorkers, "job-workers", true, "consume the job queue on this daemon (false: jobs are refused with WORKER_UNAVAILABLE)")
	f.StringArrayVar(&jobMemory, "job-memory", nil, "memory of each job sandbox of PROFILE, as PROFILE=MB (default 4096 for each; /dev/shm is a quarter of it, at most 1024)")
	f.StringArrayVar(&jobPools, "job-pool", nil, "keep N fresh job runtimes of PROFILE started, as PROFILE=N (defaults: browser one per CPU, at least 2; office one per 2 CPUs, at least 1; pdf 0; web 0)")
	f.IntVar(&jobCap.Global, "jobs-max", jobCap.Global, "most jobs starting or running at once")
	f.IntVar(&jobCap.Tenant, "jobs-max-per-tenant", jobCap.Tenant, "most jobs starting or running at once per tenant")
	f.IntVar(&jobCap.User, "jobs-max-per-user", jobCap.User, "most jobs starting or running at once per user (Berth-User, else the API key)")
	f.IntVar(&jobReuse, "job-runtime-reuse", 1,
		"jobs one job runtime serves, one tenant's only, each in a fresh browser context (1: a fresh sandbox per job)")
	f.DurationVar(&jobRetention, "job-retention", jobs.DefaultRetention, "how long finished jobs, their events and files are kept")
	f.StringVar(&actionsDir, "actions-dir", "", "directory of action bundles (one directory each, with a berth-action.json manifest)")
	f.StringVar(&soffice, "soffice", "", "LibreOffice binary of office jobs (default: soffice on PATH)")
	f.BoolVar(&egressOn, "egress", true, "serve sandboxes' outbound network (network mode egress; needs root)")
	f.IntSliceVar(&egress.Ports, "egress-ports", []int{80, 443}, "ports a sandbox policy that names none opens")
	f.IntSliceVar(&egress.PortLimit, "egress-port-limit", nil, "the only ports any sandbox policy may open (default: --egress-ports)")
	f.StringSliceVar(&egress.Deny, "egress-deny", nil, "destinations refused to every sandbox: example.com, *.example.com, 1.2.3.4, 10.0.0.0/8[:port]")
	f.StringSliceVar(&egress.AllowOnly, "egress-allow-only", nil, "the only destinations any sandbox may reach (default: every public one)")
	f.StringSliceVar(&egress.Public, "egress-public", nil, "CIDRs treated as public although special-purpose (a test network, or your own services in a private range)")
	f.StringVar(&egress.DNS, "egress-dns", "", "resolver Berth asks for sandboxes, as HOST:PORT (default: the host's)")
	f.StringVar(&egress.NetNS, "egress-netns", "", "network namespace (a path such as /run/netns/out) to make sandboxes' outbound connections from (default: the daemon's)")
	f.StringVar(&egress.CAFile, "egress-ca-file", "", "more roots (PEM) to verify servers of hosts with secrets against")
	f.IntVar(&egress.MaxConnsPerSandbox, "egress-max-conns", 512, "most open outbound connections per sandbox")
	f.IntVar(&egress.MaxConns, "egress-max-conns-total", 16384, "most open outbound connections of all sandboxes")
	f.BoolVar(&tenantMode, "tenant-mode", false,
		"serve tenants safely: refuse the process runtime and browser sessions that run on this host")
	f.StringVar(&stationID, "station-id", httpapi.DefaultStationID, "this daemon's station ID in the Station method API (/api/v1/stations/ID/execution/...)")
	f.StringVar(&boundTenant, "tenant", "", "bind the data directory to this tenant (made on first start); a directory bound to another refuses to start")
	f.Var(&rates.PerSource, "rate-source", "requests per client address, as N/s, N/m or N/h[:burst] (off: no limit)")
	f.Var(&rates.PerKey, "rate-key", "requests per API key")
	f.Var(&rates.CreatesKey, "rate-creates", "creates (sandboxes, sessions, jobs, keys...; not commands) per API key")
	f.Var(&rates.PerTenant, "rate-tenant", "requests per tenant, all its keys together")
	f.Var(&rates.CreatesTenant, "rate-tenant-creates", "creates per tenant, all its keys together")
	f.Var(&rates.AuthFailures, "rate-auth-failures", "failed authentications per client address before it is refused for a while")
	f.StringSliceVar(&trustedProxies, "trusted-proxy", nil, "IPs or CIDRs of proxies in front whose X-Forwarded-For names the client (none by default)")
	f.BoolVar(&dashboardOn, "dashboard", true, "serve the web dashboard at / (docs/dashboard.md)")
	f.BoolVar(&insecureCookies, "insecure-cookies", false,
		"send the dashboard's session cookie without Secure, for plain HTTP other than localhost (development; TLS terminated elsewhere does not need it)")
	f.StringVar(&role, "role", "", "cluster role: hq (the public API over workers) or worker (owns sandboxes and browsers for an HQ); \"\" runs everything here (docs/operations.md)")
	f.StringVar(&database, "database", "", "the cluster's shared Postgres, as postgres://USER:PASSWORD@HOST:PORT/DB (with --role)")
	f.StringVar(&workerID, "worker-id", "", "this worker's ID, as HQ's --worker names it (with --role worker)")
	f.StringVar(&hqURL, "hq", "", "HQ's public base URL, used in the links a worker hands out (with --role worker)")
	f.StringVar(&serviceTokenFile, "service-token-file", "", "HQ: its service secret (made if missing); worker: its credential (berth workers credential)")
	f.StringArrayVar(&workerFlags, "worker", nil, "HQ: a worker, as ID=URL[,tenant=NAME] (repeatable): where HQ reaches it and the one tenant it serves")
	f.DurationVar(&workerLostAfter, "worker-lost-after", 5*time.Minute, "HQ: after its lease ran out this long, a worker's resources are reported lost")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.IntVar(&maxSandboxes, "max-sandboxes", sandbox.DefaultMaxSandboxes, "most sandboxes at once")
	f.IntVar(&maxCommands, "max-commands", agent.DefaultMaxCommands, "most concurrent commands per sandbox")
	f.IntVar(&maxHistory, "max-history", agent.DefaultMaxHistory, "finished commands retained per sandbox")
	f.Var(&outputCap, "output-cap", "output retained per command stream (bytes past it are counted, not kept)")
	f.Var(&maxUpload, "max-upload", "largest file upload")
	f.DurationVar(&commandTimeout, "command-timeout", sandbox.DefaultCommandTimeout, "default command timeout")
	f.DurationVar(&maxCommandTimeout, "max-command-timeout", sandbox.DefaultMaxTimeout, "largest timeout a command may ask for")
	return cmd
}

func newLogger(w interface{ Write([]byte) (int, error) }, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// agentCommand runs the in-sandbox agent. The daemon starts it; people
// don't.
func (a *app) agentCommand() *cobra.Command {
	var cfg agent.Config
	var tokenFD, readyFD, listenFD, workloadFD int
	var outputCap, maxUpload sizeValue
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run the in-sandbox agent (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokenFD > 0 {
				f := os.NewFile(uintptr(tokenFD), "token")
				line, err := bufio.NewReader(f).ReadString('\n')
				f.Close()
				if err != nil {
					return fmt.Errorf("reading token from fd %d: %w", tokenFD, err)
				}
				cfg.Token = strings.TrimSpace(line)
			}
			if readyFD > 0 {
				cfg.Ready = os.NewFile(uintptr(readyFD), "ready")
			}
			if workloadFD > 0 {
				// Kept from commands: only the spawn helper gets it.
				syscall.CloseOnExec(workloadFD)
				cfg.WorkloadProcs = os.NewFile(uintptr(workloadFD), "workload cgroup.procs")
			}
			if listenFD > 0 {
				f := os.NewFile(uintptr(listenFD), "listener")
				ln, err := net.FileListener(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("listener on fd %d: %w", listenFD, err)
				}
				cfg.Listener = ln
			}
			ctx := cmd.Context()
			if cfg.PID1 {
				// Signals from inside the sandbox must not stop its init;
				// the daemon stops it through the API or with SIGKILL.
				// Caught and dropped, not ignored: ignored signals would
				// stay ignored in every command the agent starts.
				signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
				ctx = context.WithoutCancel(ctx)
			}
			cfg.OutputCap, cfg.MaxUpload = int64(outputCap), int64(maxUpload)
			cfg.Logger = slog.New(slog.NewTextHandler(a.stderr, nil)).With("agent_pid", strconv.Itoa(os.Getpid()))
			ag, err := agent.New(cfg)
			if err != nil {
				return err
			}
			return ag.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.SandboxID, "sandbox-id", "", "the sandbox's ID")
	f.StringVar(&cfg.Socket, "socket", "", "unix socket to listen on (without --listen-fd)")
	f.IntVar(&listenFD, "listen-fd", 0, "file descriptor of a listening socket to serve on")
	f.BoolVar(&cfg.PID1, "pid1", false, "run as a container's init")
	f.StringVar(&cfg.Workspace, "workspace", "", "workspace directory")
	f.StringVar(&cfg.StateDir, "state", "", "state directory")
	f.Var(&outputCap, "output-cap", "output retained per stream")
	f.IntVar(&cfg.MaxCommands, "max-commands", 0, "most concurrent commands")
	f.IntVar(&cfg.MaxHistory, "max-history", 0, "finished commands retained")
	f.Var(&maxUpload, "max-upload", "largest upload")
	f.IntVar(&tokenFD, "token-fd", 0, "file descriptor to read the token from")
	f.IntVar(&readyFD, "ready-fd", 0, "file descriptor to report readiness on")
	f.IntVar(&workloadFD, "workload-cgroup-fd", 0, "file descriptor of the workload cgroup's cgroup.procs")
	f.Uint64Var(&cfg.WorkloadNProc, "workload-nproc", 0, "RLIMIT_NPROC of every process started")
	return cmd
}

// printNextSteps tells whoever started the daemon how to use it, in the
// two lines a newcomer needs.
func (a *app) printNextSteps(addr string, dashboard bool) {
	env := ""
	if addr != "127.0.0.1:7070" {
		env = "export BERTH_URL=http://" + addr + "; "
	}
	key := filepath.Join(a.dataDir(), daemon.KeyFile)
	fmt.Fprintf(a.stderr, "\nberth is serving on http://%s. In another terminal:\n  %sexport BERTH_TOKEN=$(cat %s)\n  berth doctor; berth sandbox create\n",
		addr, env, key)
	if dashboard {
		fmt.Fprintf(a.stderr, "The dashboard is at http://%s/ (sign in with the key in %s).\n", addr, key)
	}
	fmt.Fprintln(a.stderr)
}

// clusterConfig checks the cluster flags of serve: nil for a daemon that
// runs alone.
func clusterConfig(role, database, workerID, hqURL, tokenFile string, workers []string, lostAfter time.Duration, tenant string) (*daemon.ClusterConfig, error) {
	if role == "" {
		for flag, v := range map[string]string{"--database": database, "--worker-id": workerID, "--hq": hqURL, "--service-token-file": tokenFile} {
			if v != "" {
				return nil, fmt.Errorf("%s needs --role hq or --role worker", flag)
			}
		}
		if len(workers) > 0 {
			return nil, fmt.Errorf("--worker needs --role hq")
		}
		return nil, nil
	}
	if role != daemon.RoleHQ && role != daemon.RoleWorker {
		return nil, fmt.Errorf("--role %q: want hq or worker", role)
	}
	if !strings.HasPrefix(database, "postgres://") && !strings.HasPrefix(database, "postgresql://") {
		return nil, fmt.Errorf("--role %s needs --database postgres://... (the cluster's shared Postgres; make postgres starts one)", role)
	}
	if tokenFile == "" {
		return nil, fmt.Errorf("--role %s needs --service-token-file", role)
	}
	c := &daemon.ClusterConfig{Role: role, Database: database, ServiceTokenFile: tokenFile, LostAfter: lostAfter}
	switch role {
	case daemon.RoleHQ:
		if workerID != "" || hqURL != "" {
			return nil, fmt.Errorf("--worker-id and --hq are a worker's flags")
		}
		if tenant != "" {
			return nil, fmt.Errorf("--tenant binds a worker (or a daemon alone) to a tenant, not HQ: pin the worker with --worker ID=URL,tenant=NAME")
		}
		for _, w := range workers {
			wc, err := cluster.ParseWorker(w)
			if err != nil {
				return nil, err
			}
			c.Workers = append(c.Workers, wc)
		}
	case daemon.RoleWorker:
		if len(workers) > 0 {
			return nil, fmt.Errorf("--worker is HQ's flag; a worker names itself with --worker-id")
		}
		if err := cluster.ValidWorkerID(workerID); err != nil {
			return nil, fmt.Errorf("--worker-id: %w", err)
		}
		c.WorkerID, c.HQURL = workerID, hqURL
	}
	return c, nil
}
