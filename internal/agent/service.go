package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// DefaultServiceLogBuffer is the log each service keeps, in bytes: the tail
// of its processes' output across restarts.
const DefaultServiceLogBuffer = 1 << 20

// Why a service ended, in its last_exit.reason (a state, not an error).
const (
	// ReasonStartFailed: the process could not be started at all (command
	// not found, cwd missing); the log says why.
	ReasonStartFailed = "start_failed"
	// ReasonMaxRestarts: the policy wanted another restart, but the spec's
	// max_restarts were spent.
	ReasonMaxRestarts = "max_restarts"
	// ReasonReadinessTimeout (in last_exit): the process was killed for not
	// becoming ready within ready.timeout_ms.
	ReasonReadinessTimeout = "readiness_timeout"
	// ReasonStopped (in last_exit): a caller (or the agent's shutdown)
	// stopped the process.
	ReasonStopped = "stopped"
)

// Supervision timings.
const (
	// serviceMaxBackoff caps the doubling restart delay (a delay_ms above
	// it is used as is, never doubled).
	serviceMaxBackoff = 30 * time.Second
	// serviceSteadyAfter is how long a run must stay up (when it has no
	// readiness check, or before it passed it) for its exit to count as a
	// fresh failure: the restart delay is then back to delay_ms.
	serviceSteadyAfter = 10 * time.Second
	// probeInterval is the pause between readiness probes; probeTimeout
	// bounds one probe.
	probeInterval = 100 * time.Millisecond
	probeTimeout  = time.Second
)

// service is one supervised service. It lives from its first PUT to its
// DELETE; each start (PUT, start) runs a supervisor, a serviceRun, which
// starts the process and restarts it per the spec's policy until it is
// stopped or the policy gives up. Its log outlives runs and spec changes.
//
// Lock order: ops, then Agent.mu, then mu. log has its own locks and is
// never written with mu held.
type service struct {
	name string
	log  *serviceLog

	// ops serializes the control operations (put, start, stop, delete), so
	// that at most one supervisor runs and a stop is never overtaken by a
	// start. It guards deleted.
	ops     sync.Mutex
	deleted bool // forgotten: a caller that waited on ops must look again

	// mu guards the fields below.
	mu   sync.Mutex
	spec apitype.ServiceSpec // normalized; replaced only while no run is active
	rec  apitype.Service     // live state; Spec and LogBytes are filled in by view
	pgid int                 // the current process's group, 0 when none
	run  *serviceRun         // the latest supervisor, nil before the first
}

// serviceRun is one supervisor goroutine.
type serviceRun struct {
	stop     chan struct{} // closed to ask the supervisor to stop
	stopOnce sync.Once
	// tried is closed once the first process was started, or failed to.
	tried     chan struct{}
	triedOnce sync.Once
	done      chan struct{} // closed once it ended, its process gone
}

// halt asks the supervisor to stop; it does not wait.
func (r *serviceRun) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *serviceRun) markTried() { r.triedOnce.Do(func() { close(r.tried) }) }

func (r *serviceRun) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// finalStatus reports whether status is one no supervisor changes again.
func finalStatus(status string) bool {
	switch status {
	case apitype.ServiceStopped, apitype.ServiceExited, apitype.ServiceFailed:
		return true
	}
	return false
}

// view renders the service.
func (s *service) view() apitype.Service {
	total := s.log.ring.state().total
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.rec
	v.Spec = s.spec
	v.LogBytes = total
	return v
}

// ended returns whether the service is stopped or ended for good, and a
// channel closed when its current supervisor ends (nil while a new
// service's first supervisor is being launched).
func (s *service) ended() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return false, nil
	}
	return finalStatus(s.rec.Status), s.run.done
}

// update changes the service's live state under its lock.
func (s *service) update(f func(rec *apitype.Service)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.rec)
}

// serviceLog is a service's log: a ring with its processes' standard output
// and standard error, and the lines the supervisor adds about what it does.
type serviceLog struct {
	ring *ring

	// mu serializes writes, so that a note starts on a line of its own; it
	// guards midLine.
	mu      sync.Mutex
	midLine bool // the last byte written was not a newline
}

// Write appends process output. It never fails.
func (l *serviceLog) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.ring.Write(p)
	l.midLine = p[len(p)-1] != '\n'
	return len(p), nil
}

// note appends a supervisor line, marked as Berth's.
func (l *serviceLog) note(format string, args ...any) {
	msg := "[berth] " + fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.midLine {
		msg = "\n" + msg
	}
	_, _ = l.ring.Write([]byte(msg))
	l.midLine = false
}

// normalizeSpec validates spec, fills in its defaults and gives equal specs
// one form, so that reflect.DeepEqual tells a replay from a change.
func normalizeSpec(spec apitype.ServiceSpec) (apitype.ServiceSpec, error) {
	if spec.Ready != nil {
		r := *spec.Ready // Valid fills in defaults: not in the caller's struct
		spec.Ready = &r
	}
	p := spec.Valid()
	if spec.Cwd != "" && p["cwd"] == "" {
		if _, err := CleanPath(spec.Cwd); err != nil {
			if p == nil {
				p = map[string]string{}
			}
			p["cwd"] = wire.Detail(err, "").Message
		}
	}
	if p != nil {
		return spec, errcode.InvalidFields(p)
	}
	if len(spec.Argv) == 0 {
		spec.Argv = nil
	}
	if len(spec.Env) == 0 {
		spec.Env = nil
	}
	return spec, nil
}

// putService starts a service, or replaces one whose spec changed or that
// has ended. created is false when an active service with an identical
// spec was left alone.
func (a *Agent) putService(spec apitype.ServiceSpec) (_ apitype.Service, created bool, _ error) {
	spec, err := normalizeSpec(spec)
	if err != nil {
		return apitype.Service{}, false, err
	}
	// Refused now, as a command's would be, not at the start that follows.
	if _, err := a.workDir(spec.Cwd); err != nil {
		return apitype.Service{}, false, err
	}
	for {
		a.mu.Lock()
		if a.closing {
			a.mu.Unlock()
			return apitype.Service{}, false, errcode.New(errcode.Unavailable, "agent is shutting down")
		}
		s := a.services[spec.Name]
		if s == nil {
			if len(a.services) >= apitype.MaxServices {
				a.mu.Unlock()
				return apitype.Service{}, false, errcode.TooManyServices.New("sandbox already has %d services, the maximum; delete one first", apitype.MaxServices)
			}
			s = &service{
				name: spec.Name,
				log:  &serviceLog{ring: newRing(a.cfg.ServiceLogBuffer)},
				rec:  apitype.Service{Name: spec.Name, SandboxID: a.cfg.SandboxID, Status: apitype.ServiceStarting},
				spec: spec,
			}
			s.ops.Lock() // unpublished: cannot block
			a.services[spec.Name] = s
			a.mu.Unlock()
			defer s.ops.Unlock()
			if err := a.launchService(s, spec); err != nil {
				a.mu.Lock()
				delete(a.services, spec.Name)
				a.mu.Unlock()
				s.deleted = true
				return apitype.Service{}, false, err
			}
			return s.view(), true, nil
		}
		a.mu.Unlock()

		s.ops.Lock()
		if s.deleted {
			s.ops.Unlock()
			continue
		}
		defer s.ops.Unlock()
		s.mu.Lock()
		same := reflect.DeepEqual(s.spec, spec)
		status := s.rec.Status
		s.mu.Unlock()
		if same && !finalStatus(status) {
			return s.view(), false, nil
		}
		if !same && !finalStatus(status) {
			s.log.note("service spec changed; replacing the running service")
		}
		a.haltService(s)
		if err := a.launchService(s, spec); err != nil {
			return apitype.Service{}, false, err
		}
		return s.view(), true, nil
	}
}

// launchService starts a supervisor for s with spec, its restarts counted
// from zero, and returns once it tried to start the process, so that the
// caller's view of s has its PID (or its start failure). No other
// supervisor of s may be active: the caller holds s.ops and has halted the
// last one. It refuses once the agent is closing, so that shutdown sees
// every supervisor it must stop.
func (a *Agent) launchService(s *service, spec apitype.ServiceSpec) error {
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return errcode.New(errcode.Unavailable, "agent is shutting down")
	}
	run := &serviceRun{stop: make(chan struct{}), tried: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.spec, s.run = spec, run
	s.rec.Status, s.rec.Reason, s.rec.Restarts, s.rec.PID, s.rec.Ready = apitype.ServiceStarting, "", 0, 0, false
	s.mu.Unlock()
	a.wg.Add(1)
	go a.supervise(s, run, spec)
	a.mu.Unlock()
	<-run.tried
	return nil
}

// haltService stops s's supervisor, if one is active, and waits for it and
// its process to end.
func (a *Agent) haltService(s *service) {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run != nil {
		run.halt()
		<-run.done
	}
}

// startService starts an ended service again, its restarts reset. An
// active one is left alone.
func (a *Agent) startService(s *service) (apitype.Service, error) {
	s.ops.Lock()
	defer s.ops.Unlock()
	if s.deleted {
		return apitype.Service{}, serviceNotFound(s.name)
	}
	s.mu.Lock()
	spec, status := s.spec, s.rec.Status
	s.mu.Unlock()
	if !finalStatus(status) {
		return s.view(), nil
	}
	a.haltService(s) // its supervisor may be finishing still
	if err := a.launchService(s, spec); err != nil {
		return apitype.Service{}, err
	}
	return s.view(), nil
}

// stopService stops s (SIGTERM to its process group, SIGKILL after the
// grace period) and waits for it. A service that already ended keeps its
// status.
func (a *Agent) stopService(s *service) (apitype.Service, error) {
	s.ops.Lock()
	defer s.ops.Unlock()
	if s.deleted {
		return apitype.Service{}, serviceNotFound(s.name)
	}
	a.haltService(s)
	return s.view(), nil
}

// deleteService stops s and forgets it, log included.
func (a *Agent) deleteService(s *service) error {
	s.ops.Lock()
	defer s.ops.Unlock()
	if s.deleted {
		return serviceNotFound(s.name)
	}
	a.haltService(s)
	a.mu.Lock()
	delete(a.services, s.name)
	a.mu.Unlock()
	s.deleted = true
	return nil
}

// stopServices stops every service, at shutdown; a.closing is set, so no
// new supervisor starts.
func (a *Agent) stopServices() {
	a.mu.Lock()
	all := make([]*service, 0, len(a.services))
	for _, s := range a.services {
		all = append(all, s)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { a.haltService(s) })
	}
	wg.Wait()
}

// servicePIDsLocked adds the PIDs of services' current processes, which
// their supervisors wait for, to pids. Called with a.mu held.
func (a *Agent) servicePIDsLocked(pids map[int]bool) {
	for _, s := range a.services {
		s.mu.Lock()
		if s.pgid > 0 {
			pids[s.pgid] = true
		}
		s.mu.Unlock()
	}
}

func serviceNotFound(name string) error {
	return errcode.ServiceNotFound.New("service %q not found", name)
}

// supervise runs spec's process and restarts it per its policy until a
// caller stops it or the policy gives up.
func (a *Agent) supervise(s *service, run *serviceRun, spec apitype.ServiceSpec) {
	defer a.wg.Done()
	defer close(run.done)
	defer run.markTried() // after the final status: a start that failed is reported as failed
	base := time.Duration(spec.Restart.DelayMS) * time.Millisecond
	delay := base
	end := func(status, reason string) {
		s.update(func(rec *apitype.Service) { rec.Status, rec.Reason, rec.PID, rec.Ready = status, reason, 0, false })
		a.log.Info("service ended", "service", s.name, "status", status, "reason", reason)
	}
	for restarts := 0; ; {
		out := a.runService(s, run, spec)
		switch {
		case run.stopping():
			s.log.note("service stopped")
			end(apitype.ServiceStopped, "")
			return
		case out.startErr != "":
			s.log.note("service could not start: %s", out.startErr)
			end(apitype.ServiceFailed, ReasonStartFailed)
			return
		}
		policy := spec.Restart.Policy
		if policy == apitype.RestartNever || policy == apitype.RestartOnFailure && !out.failure {
			s.log.note("service %s; not restarting (policy %s)", out.desc, policy)
			end(apitype.ServiceExited, "")
			return
		}
		if limit := spec.Restart.MaxRestarts; limit > 0 && restarts >= limit {
			s.log.note("service %s; not restarting: max_restarts (%d) reached", out.desc, limit)
			end(apitype.ServiceFailed, ReasonMaxRestarts)
			return
		}
		if out.steady {
			delay = base
		}
		bound := ""
		if spec.Restart.MaxRestarts > 0 {
			bound = " of " + strconv.Itoa(spec.Restart.MaxRestarts)
		}
		s.log.note("service %s; restarting in %s (restart %d%s)", out.desc, delay, restarts+1, bound)
		s.update(func(rec *apitype.Service) { rec.Status, rec.Reason = apitype.ServiceBackoff, "" })
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-run.stop:
			t.Stop()
			s.log.note("service stopped")
			end(apitype.ServiceStopped, "")
			return
		}
		// Every run that ends before it was steady doubles the delay, so a
		// crash loop slows down instead of spinning.
		delay = min(2*delay, max(serviceMaxBackoff, base))
		restarts++
		s.update(func(rec *apitype.Service) { rec.Restarts = restarts })
	}
}

// runOutcome is how one run of a service's process went.
type runOutcome struct {
	startErr string // the process could not start; nothing else is set
	desc     string // how it ended, for the log: "exited with code 1"
	failure  bool   // a non-zero exit, a signal, no readiness in time
	steady   bool   // it became ready, or stayed up long enough
}

// runService starts the service's process once and supervises it until it
// exits: it probes readiness, kills a process not ready in time, and stops
// it when run is halted. The process, its group and its output are gone
// when it returns.
func (a *Agent) runService(s *service, run *serviceRun, spec apitype.ServiceSpec) runOutcome {
	s.update(func(rec *apitype.Service) {
		rec.Status, rec.Reason, rec.PID, rec.Ready = apitype.ServiceStarting, "", 0, false
	})
	cmd, err := a.serviceCmd(spec)
	if err != nil {
		return a.startFailed(s, wire.Detail(err, "").Message)
	}
	// One pipe for both streams, so that the log interleaves them as
	// written; ours, so that the process's exit (not EOF) ends a run.
	pr, pw, err := os.Pipe()
	if err != nil {
		return a.startFailed(s, err.Error())
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	// Start and record the PID under a.mu: the orphan reaper reads owned
	// PIDs under it, so it never sees this process without knowing it.
	a.mu.Lock()
	startErr := a.startProcess(cmd, cmd.Start)
	started := time.Now()
	if startErr == nil {
		at := started.UTC()
		s.mu.Lock()
		s.pgid = cmd.Process.Pid
		s.rec.PID, s.rec.StartedAt = cmd.Process.Pid, &at
		if spec.Ready == nil {
			s.rec.Status = apitype.ServiceRunning
		}
		s.mu.Unlock()
	}
	a.mu.Unlock()
	pw.Close()
	if startErr != nil {
		pr.Close()
		return a.startFailed(s, startMessage(startErr))
	}
	run.markTried() // a failed start is marked by supervise, once it recorded it
	pgid := cmd.Process.Pid
	resetOOMScore(pgid)
	s.log.note("service started (pid %d)", pgid)

	var copier sync.WaitGroup
	copier.Go(func() { copyOut(s.log, pr) })
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()

	var readyc <-chan struct{}
	var deadline <-chan time.Time
	var prober sync.WaitGroup
	probeCtx, stopProbe := context.WithCancel(context.Background())
	if r := spec.Ready; r != nil {
		ch := make(chan struct{})
		readyc = ch
		prober.Go(func() { probeReady(probeCtx, spec.Port, r, ch) })
		timer := time.NewTimer(time.Duration(r.TimeoutMS) * time.Millisecond)
		defer timer.Stop()
		deadline = timer.C
	}

	var out runOutcome
	notReady := false
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-readyc:
			readyc, deadline = nil, nil
			out.steady = true
			s.update(func(rec *apitype.Service) { rec.Status, rec.Ready = apitype.ServiceRunning, true })
			s.log.note("service is ready (port %d)", spec.Port)
		case <-deadline:
			notReady = true
			s.log.note("service not ready within %s; stopping it", time.Duration(spec.Ready.TimeoutMS)*time.Millisecond)
			a.endGroup(s, pgid, exited)
			break wait
		case <-run.stop:
			s.log.note("stopping service (SIGTERM)")
			a.endGroup(s, pgid, exited)
			break wait
		}
	}
	stopProbe()
	prober.Wait()
	// The leader is gone: end what it left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitBounded(&copier, drainBound, func() { pr.Close() })
	pr.Close()

	ex := &apitype.ServiceExit{At: time.Now().UTC()}
	ps := cmd.ProcessState
	switch ws, ok := waitStatus(ps); {
	case ok && ws.Exited():
		code := ws.ExitStatus()
		ex.ExitCode = &code
		out.desc, out.failure = fmt.Sprintf("exited with code %d", code), code != 0
	case ok && ws.Signaled():
		ex.Signal = signalName(ws.Signal())
		out.desc, out.failure = "was killed by "+ex.Signal, true
	default:
		out.desc, out.failure = fmt.Sprintf("ended (%v)", werr), true
	}
	switch {
	case run.stopping():
		ex.Reason = ReasonStopped
	case notReady:
		ex.Reason = ReasonReadinessTimeout
		out.desc = fmt.Sprintf("was not ready within %s", time.Duration(spec.Ready.TimeoutMS)*time.Millisecond)
		out.failure = true
	}
	if time.Since(started) >= serviceSteadyAfter {
		out.steady = true
	}
	s.mu.Lock()
	s.pgid = 0
	s.rec.PID, s.rec.Ready, s.rec.LastExit = 0, false, ex
	s.mu.Unlock()
	return out
}

func waitStatus(ps *os.ProcessState) (syscall.WaitStatus, bool) {
	if ps == nil {
		return 0, false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ws, ok
}

// startFailed records a process that could not start.
func (a *Agent) startFailed(s *service, msg string) runOutcome {
	s.update(func(rec *apitype.Service) {
		rec.LastExit = &apitype.ServiceExit{Reason: ReasonStartFailed, At: time.Now().UTC()}
	})
	return runOutcome{startErr: msg}
}

// endGroup ends a service's process group: SIGTERM, then SIGKILL if its
// leader has not exited after the grace period. It returns once the leader
// has exited.
func (a *Agent) endGroup(s *service, pgid int, exited <-chan struct{}) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(a.cfg.KillGrace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	s.log.note("service did not stop within %s; sending SIGKILL", a.cfg.KillGrace)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
}

// serviceCmd prepares a run of spec's process, as commands are prepared:
// the same environment (plus PORT, when the spec has a port and its env
// does not set it), the same cwd rules and PATH search. An error is one the
// service cannot start with.
func (a *Agent) serviceCmd(spec apitype.ServiceSpec) (*exec.Cmd, error) {
	argv := spec.Argv
	if spec.Command != "" {
		argv = []string{"/bin/sh", "-c", spec.Command}
	}
	cwd, err := a.workDir(spec.Cwd)
	if err != nil {
		return nil, err
	}
	extra := spec.Env
	if _, ok := spec.Env["PORT"]; !ok && spec.Port > 0 {
		extra = map[string]string{"PORT": strconv.Itoa(spec.Port)}
		for k, v := range spec.Env {
			extra[k] = v
		}
	}
	env := a.commandEnv(extra)
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: filepath.Join(a.cfg.Workspace, cwd), Env: env, SysProcAttr: commandAttr()}
	if !strings.Contains(argv[0], "/") {
		cmd.Path, cmd.Err = lookPath(argv[0], envValue(env, "PATH"), cmd.Dir)
	}
	return cmd, nil
}

// probeReady probes the service every probeInterval until it answers (then
// it closes ready) or ctx ends.
func probeReady(ctx context.Context, port int, r *apitype.Readiness, ready chan<- struct{}) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hc := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true},
		// A redirect is an answer: the service is up.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	probe := func() bool {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		if r.TCP {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return false
			}
			c.Close()
			return true
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+r.HTTPPath, nil)
		if err != nil {
			return false
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return resp.StatusCode < 500
	}
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		if probe() {
			close(ready)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) lookupService(r *http.Request) (*service, error) {
	name := r.PathValue("name")
	a.mu.Lock()
	s, ok := a.services[name]
	a.mu.Unlock()
	if !ok {
		return nil, serviceNotFound(name)
	}
	return s, nil
}

// handlePutService starts or replaces a service: 201 when it started one,
// 200 when an active service already had this spec (a replay).
func (a *Agent) handlePutService(w http.ResponseWriter, r *http.Request) {
	// Not wire.Decode: it would validate before the name comes from the path.
	var spec apitype.ServiceSpec
	if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, wire.MaxJSONBody), &spec); err != nil {
		a.fail(w, r, err)
		return
	}
	switch name := r.PathValue("name"); {
	case spec.Name == "":
		spec.Name = name
	case spec.Name != name:
		a.fail(w, r, errcode.InvalidFields(map[string]string{"name": "must match the name in the path"}))
		return
	}
	svc, created, err := a.putService(spec)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	wire.Encode(w, status, svc)
}

func (a *Agent) handleListServices(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	all := make([]*service, 0, len(a.services))
	for _, s := range a.services {
		all = append(all, s)
	}
	a.mu.Unlock()
	slices.SortFunc(all, func(x, y *service) int { return strings.Compare(x.name, y.name) })
	out := apitype.ServiceList{Services: make([]apitype.Service, 0, len(all))}
	for _, s := range all {
		out.Services = append(out.Services, s.view())
	}
	wire.Encode(w, http.StatusOK, out)
}

func (a *Agent) handleGetService(w http.ResponseWriter, r *http.Request) {
	s, err := a.lookupService(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, s.view())
}

func (a *Agent) handleStopService(w http.ResponseWriter, r *http.Request) {
	a.serviceOp(w, r, a.stopService)
}

func (a *Agent) handleStartService(w http.ResponseWriter, r *http.Request) {
	a.serviceOp(w, r, a.startService)
}

func (a *Agent) serviceOp(w http.ResponseWriter, r *http.Request, op func(*service) (apitype.Service, error)) {
	s, err := a.lookupService(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	svc, err := op(s)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, svc)
}

func (a *Agent) handleDeleteService(w http.ResponseWriter, r *http.Request) {
	s, err := a.lookupService(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.deleteService(s); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleServiceLogs answers a window of a service's log. With wait_ms it
// waits for bytes past offset, or for the service to end for good.
func (a *Agent) handleServiceLogs(w http.ResponseWriter, r *http.Request) {
	offset, wait, maxBytes, err := terminalQuery(r, int64(a.cfg.ServiceLogBuffer))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.lookupService(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
	wait:
		for {
			st := s.log.ring.state()
			done, runDone := s.ended()
			if st.total > offset || done {
				break
			}
			select {
			case <-st.changed:
			case <-runDone:
			case <-timer.C:
				break wait
			case <-r.Context().Done():
				break wait
			}
		}
	}
	// Done first: once it is set, the window below is complete.
	done, _ := s.ended()
	b, start, _, truncated := s.log.ring.read(offset, maxBytes)
	if !done || int64(len(b)) == maxBytes {
		if t := trimPartialRune(b); len(t) > 0 {
			b = t // never return nothing when bytes are there: readers would spin
		}
	}
	if truncated && !utf8.Valid(b) {
		// The ring drops bytes at any point, maybe inside a character:
		// text that starts with the rest of one starts after it.
		k := 0
		for k < 3 && k < len(b)-1 && !utf8.RuneStart(b[k]) {
			k++
		}
		if k > 0 && utf8.Valid(b[k:]) {
			b, start = b[k:], start+int64(k)
		}
	}
	out := apitype.ServiceLogs{Offset: start, NextOffset: start + int64(len(b)), Truncated: truncated, Done: done}
	if utf8.Valid(b) {
		out.Data = string(b)
	} else {
		out.DataBase64 = base64.StdEncoding.EncodeToString(b)
	}
	wire.Encode(w, http.StatusOK, out)
}
