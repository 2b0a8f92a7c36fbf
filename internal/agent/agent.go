package agent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Config configures an agent. Zero limits take the defaults below.
type Config struct {
	SandboxID string // stamped on command records
	// Listener, when set, is the socket to serve on, made and passed in by
	// the daemon: the agent then never needs a path the sandbox could
	// tamper with. Otherwise the agent listens on Socket.
	Listener net.Listener
	Socket   string
	// PID1 is set when the agent is a container's init: it then ignores
	// SIGTERM and SIGINT (a command could send them) and stops only through
	// its API or SIGKILL from outside.
	PID1      bool
	Workspace string // the workspace directory, as the agent sees it
	StateDir  string // private state: command output and metadata
	Token     string // bearer token the daemon presents
	// PathPrefix is prepended to PATH for commands (for example the
	// workspace's node_modules/.bin).
	OutputCap   int64
	MaxCommands int
	MaxHistory  int
	MaxUpload   int64
	MaxDownload int64
	KillGrace   time.Duration
	// TerminalBuffer is each terminal's replay buffer, in bytes;
	// MaxTerminals bounds the running terminals (and the exited ones kept).
	TerminalBuffer int
	MaxTerminals   int
	// ServiceLogBuffer is each service's log, in bytes: the tail of its
	// output across restarts.
	ServiceLogBuffer int
	// WorkloadProcs, when set, is the cgroup.procs of the sandbox's
	// workload cgroup, opened by the host, and WorkloadNProc, when
	// positive, an RLIMIT_NPROC: every process the agent starts goes into
	// that cgroup and gets that limit before its program runs (see
	// SpawnCommand), so that the workload runs out of PIDs before the
	// agent does.
	WorkloadProcs *os.File
	WorkloadNProc uint64
	Logger        *slog.Logger
	// Ready, if set, is closed (after a line is written to it) once the
	// agent is listening.
	Ready *os.File
}

// Defaults.
const (
	DefaultOutputCap   = 1 << 20
	DefaultMaxCommands = 16
	DefaultMaxHistory  = 100
	DefaultMaxUpload   = 64 << 20
	DefaultMaxDownload = 4 << 30
	DefaultKillGrace   = 2 * time.Second
)

// Agent runs inside a sandbox: it executes commands and serves files for
// the daemon, over HTTP on a unix socket.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	root *os.Root
	self string // the agent's binary, for the spawn helper

	// rootConfines is false where the kernel lets os.Root follow a link
	// out (gVisor): paths are then resolved by resolveBeneath.
	rootConfines bool

	wg   sync.WaitGroup // command waiters and service supervisors
	stop func()         // ends Run; set by Run

	// mu guards the fields below.
	mu        sync.Mutex
	cmds      map[string]*command
	order     []string // command IDs, oldest first
	running   int
	closing   bool
	terms     map[string]*terminal
	termOrder []string // terminal IDs, oldest first
	services  map[string]*service
}

// New prepares an agent: it opens the workspace root and reloads the
// commands recorded in the state directory (those that were running when a
// previous agent died are marked interrupted).
func New(cfg Config) (*Agent, error) {
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.MaxCommands <= 0 {
		cfg.MaxCommands = DefaultMaxCommands
	}
	if cfg.MaxHistory <= 0 {
		cfg.MaxHistory = DefaultMaxHistory
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.MaxDownload <= 0 {
		cfg.MaxDownload = DefaultMaxDownload
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.TerminalBuffer <= 0 {
		cfg.TerminalBuffer = DefaultTerminalBuffer
	}
	if cfg.MaxTerminals <= 0 {
		cfg.MaxTerminals = DefaultMaxTerminals
	}
	if cfg.ServiceLogBuffer <= 0 {
		cfg.ServiceLogBuffer = DefaultServiceLogBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Token == "" {
		return nil, errors.New("agent token is empty")
	}
	root, err := os.OpenRoot(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("opening workspace: %w", err)
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, root: root, cmds: make(map[string]*command), terms: make(map[string]*terminal),
		services: make(map[string]*service), rootConfines: rootConfines(cfg.StateDir)}
	if !a.rootConfines {
		a.log.Warn("os.Root does not confine links here; resolving them in the agent")
	}
	if a.workloadBudget() {
		if a.self, err = os.Executable(); err != nil {
			root.Close()
			return nil, fmt.Errorf("finding the agent's binary for the spawn helper: %w", err)
		}
	}
	if err := a.load(); err != nil {
		root.Close()
		return nil, err
	}
	return a, nil
}

// load reads command records left by an earlier agent.
func (a *Agent) load() error {
	dir := filepath.Join(a.cfg.StateDir, "cmds")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var loaded []*command
	for _, e := range entries {
		c, err := a.loadCommand(filepath.Join(dir, e.Name()))
		if err != nil {
			a.log.Warn("dropping unreadable command state", "dir", e.Name(), "err", err)
			os.RemoveAll(filepath.Join(dir, e.Name()))
			continue
		}
		loaded = append(loaded, c)
	}
	slices.SortFunc(loaded, func(x, y *command) int { return x.rec.StartedAt.Compare(y.rec.StartedAt) })
	for _, c := range loaded {
		a.cmds[c.id] = c
		a.order = append(a.order, c.id)
	}
	a.pruneLocked()
	return nil
}

func (a *Agent) loadCommand(dir string) (*command, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if !validID(m.ID, "cmd_") || filepath.Base(dir) != m.ID {
		return nil, fmt.Errorf("bad command id %q", m.ID)
	}
	c := &command{id: m.ID, dir: dir, rec: m.Command, done: make(chan struct{})}
	close(c.done)
	if c.rec.Status == apitype.CommandRunning {
		now := time.Now().UTC()
		c.rec.Status, c.rec.Reason, c.rec.FinishedAt = apitype.CommandInterrupted, "agent restarted", &now
	}
	for _, s := range []struct {
		name  string
		total int64
		dst   **output
	}{{"stdout", m.StdoutTotal, &c.stdout}, {"stderr", m.StderrTotal, &c.stderr}} {
		f, err := os.OpenFile(filepath.Join(dir, s.name), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		if *s.dst, err = loadOutput(f, a.cfg.OutputCap, s.total); err != nil {
			f.Close()
			return nil, err
		}
	}
	if m.Status == apitype.CommandRunning {
		a.persist(c)
	}
	return c, nil
}

// Run serves the agent API until ctx is done, then stops every command.
func (a *Agent) Run(ctx context.Context) error {
	becomeSubreaper()

	ln := a.cfg.Listener
	if ln == nil {
		os.Remove(a.cfg.Socket)
		var err error
		if ln, err = listenUnix(a.cfg.Socket); err != nil {
			return fmt.Errorf("listening on %s: %w", a.cfg.Socket, err)
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	a.stop = stop
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if a.cfg.Ready != nil {
		fmt.Fprintln(a.cfg.Ready, "ready")
		a.cfg.Ready.Close()
	}
	a.log.Info("agent listening", "addr", ln.Addr().String(), "pid", os.Getpid())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	reap := time.NewTicker(time.Second)
	defer reap.Stop()
	for {
		select {
		case err := <-errc:
			a.shutdown()
			return err
		case <-reap.C:
			a.reapOrphans()
		case <-ctx.Done():
			shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = srv.Shutdown(shutCtx)
			cancel()
			a.shutdown()
			return nil
		}
	}
}

// shutdown kills every command, stops every service (gracefully, as a
// stop request would), kills every terminal and every process the agent
// inherited, and waits for them.
func (a *Agent) shutdown() {
	a.mu.Lock()
	a.closing = true
	var live []*command
	for _, c := range a.cmds {
		if !c.isDone() {
			live = append(live, c)
		}
	}
	a.mu.Unlock()
	for _, c := range live {
		c.mu.Lock()
		if c.killStatus == "" {
			c.killStatus = apitype.CommandInterrupted
			c.rec.Reason = "sandbox stopped"
		}
		pgid := c.pgid
		c.mu.Unlock()
		if pgid > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	a.stopServices()
	a.killTerminals()
	a.killOrphans()
	a.wg.Wait()
}

// commandEnv builds a command's environment: a small fixed base, then the
// request's variables.
func (a *Agent) commandEnv(extra map[string]string) []string {
	ws := a.cfg.Workspace
	base := map[string]string{
		"HOME":   ws,
		"PWD":    ws,
		"LANG":   "C.UTF-8",
		"TERM":   "dumb",
		"PATH":   ws + "/node_modules/.bin:" + ws + "/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SHELL":  "/bin/sh",
		"BERTH":  "1",
		"TMPDIR": os.TempDir(),
	}
	for k, v := range extra {
		base[k] = v
	}
	env := make([]string, 0, len(base))
	for k, v := range base {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// Handler returns the agent's HTTP API, behind token authentication.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", a.handlePing)
	mux.HandleFunc("POST /v1/shutdown", a.handleShutdown)
	mux.HandleFunc("POST /v1/commands", a.handleStart)
	mux.HandleFunc("GET /v1/commands", a.handleList)
	mux.HandleFunc("GET /v1/commands/{cid}", a.handleGet)
	mux.HandleFunc("DELETE /v1/commands/{cid}", a.handleForget)
	mux.HandleFunc("GET /v1/commands/{cid}/stream", a.handleStream)
	mux.HandleFunc("POST /v1/commands/{cid}/cancel", a.handleCancel)
	mux.HandleFunc("POST /v1/commands/{cid}/stdin", a.handleStdin)
	mux.HandleFunc("GET /v1/files", a.handleListFiles)
	mux.HandleFunc("GET /v1/files/content", a.handleReadFile)
	mux.HandleFunc("PUT /v1/files/content", a.handleWriteFile)
	mux.HandleFunc("POST /v1/files/mkdir", a.handleMkdir)
	mux.HandleFunc("POST /v1/files/move", a.handleMove)
	mux.HandleFunc("DELETE /v1/files", a.handleRemove)
	mux.HandleFunc("POST /v1/terminals", a.handleCreateTerminal)
	mux.HandleFunc("GET /v1/terminals", a.handleListTerminals)
	mux.HandleFunc("GET /v1/terminals/{tid}/output", a.handleTerminalOutput)
	mux.HandleFunc("POST /v1/terminals/{tid}/input", a.handleTerminalInput)
	mux.HandleFunc("POST /v1/terminals/{tid}/resize", a.handleTerminalResize)
	mux.HandleFunc("DELETE /v1/terminals/{tid}", a.handleDeleteTerminal)
	mux.HandleFunc("GET /v1/terminals/{tid}/ws", a.handleTerminalWS)
	mux.HandleFunc("/v1/ports/{port}/{path...}", a.handlePort)
	mux.HandleFunc("GET /v1/services", a.handleListServices)
	mux.HandleFunc("PUT /v1/services/{name}", a.handlePutService)
	mux.HandleFunc("GET /v1/services/{name}", a.handleGetService)
	mux.HandleFunc("DELETE /v1/services/{name}", a.handleDeleteService)
	mux.HandleFunc("GET /v1/services/{name}/logs", a.handleServiceLogs)
	mux.HandleFunc("POST /v1/services/{name}/stop", a.handleStopService)
	mux.HandleFunc("POST /v1/services/{name}/start", a.handleStartService)
	return a.authenticate(mux)
}

func (a *Agent) authenticate(next http.Handler) http.Handler {
	want := []byte("Bearer " + a.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			a.fail(w, r, errcode.New(errcode.Unauthenticated, "missing or wrong agent token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Agent) lookup(r *http.Request) (*command, error) {
	id := r.PathValue("cid")
	a.mu.Lock()
	c, ok := a.cmds[id]
	a.mu.Unlock()
	if !ok {
		return nil, errcode.CommandNotFound.New("command %q not found", id)
	}
	return c, nil
}

// list returns every command, newest first.
func (a *Agent) list() []*command {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*command, 0, len(a.order))
	for i := len(a.order) - 1; i >= 0; i-- {
		out = append(out, a.cmds[a.order[i]])
	}
	return out
}

// reapOrphans waits for zombie children that are not commands, terminals
// or services the agent started itself (those are waited for by their own
// goroutine).
func (a *Agent) reapOrphans() {
	// Children first, owned PIDs second: processes are started and
	// recorded under a.mu, so every child listed is then known if owned.
	kids := children(os.Getpid())
	own := a.commandPIDs()
	for _, pid := range kids {
		if !own[pid] {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// killOrphans kills and reaps every remaining descendant. Grandchildren
// reparent to the agent (a subreaper) as their parents die, so it repeats
// until none is left or a bound is reached.
func (a *Agent) killOrphans() {
	own := a.commandPIDs()
	for range 50 {
		kids := children(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = unix.Kill(pid, unix.SIGKILL)
			if !own[pid] {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(pid, &ws, 0, nil)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *Agent) commandPIDs() map[int]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	pids := make(map[int]bool)
	for _, c := range a.cmds {
		if !c.isDone() && c.pgid > 0 {
			pids[c.pgid] = true
		}
	}
	a.terminalPIDsLocked(pids)
	a.servicePIDsLocked(pids)
	return pids
}

// children lists the PIDs whose parent is ppid, from /proc.
func children(ppid int) []int { return ProcessTree()[ppid] }

// ProcessTree maps each PID to the PIDs of its children, from /proc.
func ProcessTree() map[int][]int {
	tree := map[int][]int{}
	for pid, f := range procStats() {
		if ppid, err := strconv.Atoi(f[statPPID]); err == nil {
			tree[ppid] = append(tree[ppid], pid)
		}
	}
	return tree
}

// Fields of /proc/PID/stat, counted after the parenthesized command name.
const (
	statPPID    = 1
	statPgrp    = 2
	statSession = 3
)

// procStats reads /proc/PID/stat of every process, as the fields after
// the command name (which is in parentheses and may contain anything),
// keeping those with at least statSession+1 of them.
func procStats() map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > statSession {
			out[pid] = f
		}
	}
	return out
}
