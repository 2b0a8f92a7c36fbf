package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// The service tests run one at a time, without t.Parallel: an agent's Run
// makes the test process a subreaper that reaps its orphans and, at
// shutdown, kills every child of the process, which would take another
// test's agent's processes with it.

// testAgent is a real agent serving its real handler on a unix socket, with
// a real client.
type testAgent struct {
	a    *Agent
	c    *Client
	ws   string
	stop func() // shuts the agent down and checks it left nothing behind
}

func startTestAgent(t *testing.T, tweak func(*Config)) *testAgent {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux only")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := listenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		SandboxID: "sbx_test", Listener: ln, Workspace: ws, StateDir: filepath.Join(dir, "state"),
		Token: "secret", KillGrace: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	c := NewClient(sock, cfg.Token)
	ta := &testAgent{a: a, c: c, ws: ws}
	stopped := false
	ta.stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("agent did not shut down within 30s")
		}
		c.Close()
		a.root.Close()
		if kids := children(os.Getpid()); len(kids) > 0 {
			t.Errorf("after shutdown the test process has children %v, want none", kids)
		}
		checkNoSupervisors(t)
	}
	t.Cleanup(ta.stop)
	return ta
}

// checkNoSupervisors fails t if a supervisor goroutine is still alive.
func checkNoSupervisors(t *testing.T) {
	t.Helper()
	var stacks string
	for range 100 {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "agent.(*Agent).supervise") && !strings.Contains(stacks, "agent.probeReady") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("supervisor goroutines left after shutdown:\n%s", stacks)
}

// put starts a service and fails the test if the agent refuses it.
func (ta *testAgent) put(t *testing.T, spec apitype.ServiceSpec) apitype.Service {
	t.Helper()
	svc, created, err := ta.c.PutService(context.Background(), spec)
	if err != nil {
		t.Fatalf("PutService(%s) = %v", spec.Name, err)
	}
	if !created {
		t.Fatalf("PutService(%s) created = false, want true", spec.Name)
	}
	return svc
}

// waitService polls a service until ok says yes, and fails the test after
// a bound.
func (ta *testAgent) waitService(t *testing.T, name string, what string, ok func(apitype.Service) bool) apitype.Service {
	t.Helper()
	var svc apitype.Service
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if svc, err = ta.c.Service(context.Background(), name); err != nil {
			t.Fatalf("Service(%s) = %v", name, err)
		}
		if ok(svc) {
			return svc
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("service %s never became %s; last: %+v\nlog:\n%s", name, what, svc, ta.logText(t, name))
	return svc
}

func (ta *testAgent) waitStatus(t *testing.T, name, status string) apitype.Service {
	t.Helper()
	return ta.waitService(t, name, status, func(s apitype.Service) bool { return s.Status == status })
}

// logText returns the whole retained log of a service.
func (ta *testAgent) logText(t *testing.T, name string) string {
	t.Helper()
	l, err := ta.c.ServiceLogs(context.Background(), name, nil)
	if err != nil {
		t.Fatalf("ServiceLogs(%s) = %v", name, err)
	}
	if l.DataBase64 != "" {
		b, _ := base64.StdEncoding.DecodeString(l.DataBase64)
		return string(b)
	}
	return l.Data
}

// waitGroupGone fails t unless process group pgid empties within a bound
// (the agent's reaper collects the zombies of escaped members each second).
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if pgid <= 0 {
		t.Fatalf("pgid = %d, want a process group", pgid)
	}
	var left []int
	for range 500 {
		if left = groupMembers(pgid); len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process group %d still has %v", pgid, left)
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing")
		}
		t.Skip("python3 is missing")
	}
}

func TestServiceCrashLoop(t *testing.T) {
	ta := startTestAgent(t, nil)
	ta.put(t, apitype.ServiceSpec{
		Name: "crash", Command: "echo boom; exit 1",
		Restart: apitype.RestartPolicy{Policy: apitype.RestartOnFailure, MaxRestarts: 3, DelayMS: 50},
	})
	svc := ta.waitStatus(t, "crash", apitype.ServiceFailed)
	if svc.Restarts != 3 || svc.Reason != ReasonMaxRestarts || svc.PID != 0 {
		t.Errorf("failed service = restarts %d, reason %q, pid %d; want 3, %q, 0", svc.Restarts, svc.Reason, svc.PID, ReasonMaxRestarts)
	}
	if svc.LastExit == nil || svc.LastExit.ExitCode == nil || *svc.LastExit.ExitCode != 1 {
		t.Errorf("last_exit = %+v, want exit code 1", svc.LastExit)
	}
	log := ta.logText(t, "crash")
	if got := strings.Count(log, "boom\n"); got != 4 {
		t.Errorf("log has %d runs' output, want 4:\n%s", got, log)
	}
	// The delay doubles with each consecutive failure.
	for _, want := range []string{
		"[berth] service exited with code 1; restarting in 50ms (restart 1 of 3)\n",
		"[berth] service exited with code 1; restarting in 100ms (restart 2 of 3)\n",
		"[berth] service exited with code 1; restarting in 200ms (restart 3 of 3)\n",
		"[berth] service exited with code 1; not restarting: max_restarts (3) reached\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if svc.LogBytes != int64(len(log)) {
		t.Errorf("log_bytes = %d, want %d", svc.LogBytes, len(log))
	}
}

func TestServicePolicies(t *testing.T) {
	ta := startTestAgent(t, nil)
	tests := []struct {
		name       string
		command    string
		restart    apitype.RestartPolicy
		wantStatus string
		wantReason string
		wantCode   int
		wantRuns   int
		wantLog    string
	}{
		{"never", "echo run; exit 3", apitype.RestartPolicy{Policy: apitype.RestartNever, DelayMS: 10},
			apitype.ServiceExited, "", 3, 1, "service exited with code 3; not restarting (policy never)"},
		{"on-failure-success", "echo run; exit 0", apitype.RestartPolicy{Policy: apitype.RestartOnFailure, DelayMS: 10},
			apitype.ServiceExited, "", 0, 1, "service exited with code 0; not restarting (policy on-failure)"},
		{"always-success", "echo run; exit 0", apitype.RestartPolicy{Policy: apitype.RestartAlways, MaxRestarts: 2, DelayMS: 10},
			apitype.ServiceFailed, ReasonMaxRestarts, 0, 3, "service exited with code 0; restarting in 10ms (restart 1 of 2)"},
		{"signal", "kill -USR1 $$", apitype.RestartPolicy{Policy: apitype.RestartOnFailure, MaxRestarts: 1, DelayMS: 10},
			apitype.ServiceFailed, ReasonMaxRestarts, -1, 2, "service was killed by SIGUSR1; restarting in 10ms (restart 1 of 1)"},
	}
	for _, tt := range tests {
		ta.put(t, apitype.ServiceSpec{Name: tt.name, Command: tt.command, Restart: tt.restart})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := ta.waitStatus(t, tt.name, tt.wantStatus)
			if svc.Reason != tt.wantReason || svc.Restarts != tt.wantRuns-1 {
				t.Errorf("service = reason %q, restarts %d; want %q, %d", svc.Reason, svc.Restarts, tt.wantReason, tt.wantRuns-1)
			}
			switch ex := svc.LastExit; {
			case ex == nil:
				t.Errorf("last_exit = nil")
			case tt.wantCode >= 0 && (ex.ExitCode == nil || *ex.ExitCode != tt.wantCode):
				t.Errorf("last_exit = %+v, want exit code %d", ex, tt.wantCode)
			case tt.wantCode < 0 && ex.Signal != "SIGUSR1":
				t.Errorf("last_exit = %+v, want signal SIGUSR1", ex)
			}
			log := ta.logText(t, tt.name)
			if got := strings.Count(log, "run\n"); tt.command != "kill -USR1 $$" && got != tt.wantRuns {
				t.Errorf("log shows %d runs, want %d:\n%s", got, tt.wantRuns, log)
			}
			if !strings.Contains(log, tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, log)
			}
		})
	}
}

func TestServiceStartFailure(t *testing.T) {
	ta := startTestAgent(t, nil)
	tests := []struct {
		name    string
		spec    apitype.ServiceSpec
		wantLog string
	}{
		{"no-binary", apitype.ServiceSpec{Argv: []string{"no-such-binary-berth"}}, "no-such-binary-berth: executable file not found"},
	}
	// A cwd that is not there is refused when put, as a command's is.
	if _, _, err := ta.c.PutService(context.Background(), apitype.ServiceSpec{Name: "no-cwd", Command: "true", Cwd: "missing"}); errcode.ReasonOf(err) != "file_not_found" {
		t.Errorf("PutService(cwd missing) = %v, want file_not_found", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Name = tt.name
			spec.Restart = apitype.RestartPolicy{Policy: apitype.RestartAlways, DelayMS: 10}
			ta.put(t, spec)
			svc := ta.waitStatus(t, tt.name, apitype.ServiceFailed)
			if svc.Reason != ReasonStartFailed || svc.Restarts != 0 || svc.PID != 0 {
				t.Errorf("service = reason %q, restarts %d, pid %d; want %q, 0, 0", svc.Reason, svc.Restarts, svc.PID, ReasonStartFailed)
			}
			if svc.LastExit == nil || svc.LastExit.Reason != ReasonStartFailed {
				t.Errorf("last_exit = %+v, want reason %s", svc.LastExit, ReasonStartFailed)
			}
			if log := ta.logText(t, tt.name); !strings.Contains(log, "[berth] service could not start: ") || !strings.Contains(log, tt.wantLog) {
				t.Errorf("log = %q, want the start error %q", log, tt.wantLog)
			}
		})
	}
}

func TestServiceReadiness(t *testing.T) {
	needPython(t)
	ta := startTestAgent(t, nil)
	for _, tt := range []struct {
		name  string
		ready apitype.Readiness
	}{
		{"tcp", apitype.Readiness{TCP: true}},
		{"http", apitype.Readiness{HTTPPath: "/"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			ready := tt.ready
			ta.put(t, apitype.ServiceSpec{
				Name: tt.name, Argv: []string{"python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1"},
				Port: port, Ready: &ready,
			})
			svc := ta.waitService(t, tt.name, "ready", func(s apitype.Service) bool { return s.Ready })
			if svc.Status != apitype.ServiceRunning || svc.PID == 0 || svc.StartedAt == nil {
				t.Errorf("ready service = status %s, pid %d, started_at %v; want running with a pid", svc.Status, svc.PID, svc.StartedAt)
			}
			if svc.Spec.Ready == nil || svc.Spec.Ready.TimeoutMS != 60_000 {
				t.Errorf("spec.ready = %+v, want the default timeout filled in", svc.Spec.Ready)
			}
			if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
				t.Errorf("dialing the ready service: %v", err)
			} else {
				c.Close()
			}
			if log := ta.logText(t, tt.name); !strings.Contains(log, fmt.Sprintf("[berth] service is ready (port %d)\n", port)) {
				t.Errorf("log lacks the ready line:\n%s", log)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		// Nothing listens on the port: the service is never ready.
		ta.put(t, apitype.ServiceSpec{
			Name: "never-ready", Command: "exec sleep 600", Port: freePort(t),
			Ready:   &apitype.Readiness{TCP: true, TimeoutMS: 200},
			Restart: apitype.RestartPolicy{Policy: apitype.RestartOnFailure, MaxRestarts: 1, DelayMS: 10},
		})
		svc := ta.waitStatus(t, "never-ready", apitype.ServiceFailed)
		if svc.Restarts != 1 || svc.Reason != ReasonMaxRestarts || svc.Ready {
			t.Errorf("service = restarts %d, reason %q, ready %v; want 1, %q, false", svc.Restarts, svc.Reason, svc.Ready, ReasonMaxRestarts)
		}
		if ex := svc.LastExit; ex == nil || ex.Reason != ReasonReadinessTimeout || ex.Signal != "SIGTERM" {
			t.Errorf("last_exit = %+v, want reason %s by SIGTERM", ex, ReasonReadinessTimeout)
		}
		log := ta.logText(t, "never-ready")
		for _, want := range []string{
			"[berth] service not ready within 200ms; stopping it\n",
			"[berth] service was not ready within 200ms; restarting in 10ms (restart 1 of 1)\n",
			"[berth] service was not ready within 200ms; not restarting: max_restarts (1) reached\n",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
	})
}

func TestServicePut(t *testing.T) {
	ta := startTestAgent(t, nil)
	ctx := context.Background()
	spec := apitype.ServiceSpec{Name: "web", Command: "exec sleep 600", Env: map[string]string{"A": "1"}}
	first := ta.put(t, spec)
	if first.Status != apitype.ServiceRunning || first.PID == 0 || first.SandboxID != "sbx_test" {
		t.Fatalf("new service = %+v, want running with a pid in sbx_test", first)
	}

	t.Run("identical", func(t *testing.T) {
		// A replay, with the defaults spelled out.
		again := spec
		again.Restart = apitype.RestartPolicy{Policy: apitype.RestartOnFailure, DelayMS: apitype.DefaultRestartMS}
		svc, created, err := ta.c.PutService(ctx, again)
		if err != nil || created || svc.PID != first.PID {
			t.Errorf("PutService(same) = pid %d, created %v, %v; want pid %d, false, nil", svc.PID, created, err, first.PID)
		}
	})

	var second apitype.Service
	t.Run("changed", func(t *testing.T) {
		changed := spec
		changed.Env = map[string]string{"A": "2"}
		var created bool
		var err error
		second, created, err = ta.c.PutService(ctx, changed)
		if err != nil || !created || second.PID == first.PID || second.PID == 0 {
			t.Fatalf("PutService(changed) = pid %d, created %v, %v; want a new pid, true, nil", second.PID, created, err)
		}
		waitGroupGone(t, first.PID)
		if second.Spec.Env["A"] != "2" {
			t.Errorf("spec.env = %v, want the new one", second.Spec.Env)
		}
		if log := ta.logText(t, "web"); !strings.Contains(log, "[berth] service spec changed; replacing the running service\n") {
			t.Errorf("log lacks the replacement:\n%s", log)
		}
	})

	t.Run("identical-after-stop", func(t *testing.T) {
		if _, err := ta.c.StopService(ctx, "web"); err != nil {
			t.Fatal(err)
		}
		changed := spec
		changed.Env = map[string]string{"A": "2"}
		svc, created, err := ta.c.PutService(ctx, changed)
		if err != nil || !created || svc.PID == 0 || svc.PID == second.PID {
			t.Errorf("PutService(stopped) = pid %d, created %v, %v; want a new pid, true, nil", svc.PID, created, err)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		for _, tt := range []struct {
			name  string
			spec  apitype.ServiceSpec
			path  string
			field string
		}{
			{"name mismatch", apitype.ServiceSpec{Name: "other", Command: "true"}, "web", "name"},
			{"bad name", apitype.ServiceSpec{Command: "true"}, "Bad_Name", "name"},
			{"no command", apitype.ServiceSpec{}, "web", "command"},
			{"policy", apitype.ServiceSpec{Command: "true", Restart: apitype.RestartPolicy{Policy: "sometimes"}}, "web", "restart.policy"},
			{"ready without port", apitype.ServiceSpec{Command: "true", Ready: &apitype.Readiness{TCP: true}}, "web", "ready"},
			{"cwd escapes", apitype.ServiceSpec{Command: "true", Cwd: "../.."}, "web", "cwd"},
		} {
			var out apitype.Service
			err := ta.c.doJSON(ctx, "PUT", "/v1/services/"+url.PathEscape(tt.path), nil, tt.spec, &out)
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.Invalid || e.Problems[tt.field] == "" {
				t.Errorf("%s: PUT = %v, want invalid with a problem for %s", tt.name, err, tt.field)
			}
		}
	})

	t.Run("too many", func(t *testing.T) {
		for i := 1; i < apitype.MaxServices; i++ {
			ta.put(t, apitype.ServiceSpec{Name: fmt.Sprintf("s%d", i), Command: "exec sleep 600"})
		}
		_, _, err := ta.c.PutService(ctx, apitype.ServiceSpec{Name: "one-more", Command: "exec sleep 600"})
		if errcode.CodeOf(err) != errcode.ResourceExhausted || errcode.ReasonOf(err) != errcode.TooManyServices.String() {
			t.Errorf("PutService(%d+1) = %v, want resource_exhausted %s", apitype.MaxServices, err, errcode.TooManyServices.String())
		}
		list, err := ta.c.Services(ctx)
		if err != nil || len(list) != apitype.MaxServices {
			t.Fatalf("Services() = %d services, %v; want %d", len(list), err, apitype.MaxServices)
		}
		for i := 1; i < len(list); i++ {
			if list[i-1].Name >= list[i].Name {
				t.Errorf("Services() not sorted by name: %q before %q", list[i-1].Name, list[i].Name)
			}
		}
	})
}

func TestServiceStopStart(t *testing.T) {
	ta := startTestAgent(t, nil)
	ctx := context.Background()
	for _, tt := range []struct {
		name       string
		command    string
		wantSignal string
		wantLog    string
	}{
		{"term", "sleep 600 & exec sleep 600", "SIGTERM", "[berth] stopping service (SIGTERM)\n"},
		// Ignores SIGTERM, child included: only SIGKILL ends it.
		{"stubborn", "trap '' TERM; sleep 600 & exec sleep 600", "SIGKILL", "[berth] service did not stop within 500ms; sending SIGKILL\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := ta.put(t, apitype.ServiceSpec{Name: tt.name, Command: tt.command, Restart: apitype.RestartPolicy{Policy: apitype.RestartAlways}})
			// Both sleeps are up before the stop, so the group has two.
			ta.waitService(t, tt.name, "two processes", func(apitype.Service) bool { return len(groupMembers(first.PID)) == 2 })
			svc, err := ta.c.StopService(ctx, tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if svc.Status != apitype.ServiceStopped || svc.PID != 0 || svc.Restarts != 0 {
				t.Errorf("stopped service = status %s, pid %d, restarts %d; want stopped, 0, 0", svc.Status, svc.PID, svc.Restarts)
			}
			if ex := svc.LastExit; ex == nil || ex.Reason != ReasonStopped || ex.Signal != tt.wantSignal {
				t.Errorf("last_exit = %+v, want reason %s by %s", ex, ReasonStopped, tt.wantSignal)
			}
			waitGroupGone(t, first.PID)
			log := ta.logText(t, tt.name)
			if !strings.Contains(log, tt.wantLog) || !strings.HasSuffix(log, "[berth] service stopped\n") {
				t.Errorf("log = %q, want %q and a stop line at the end", log, tt.wantLog)
			}
			// Stopped means stopped: nothing restarts it.
			if svc, err := ta.c.Service(ctx, tt.name); err != nil || svc.Status != apitype.ServiceStopped {
				t.Errorf("Service() after stop = %s, %v; want stopped", svc.Status, err)
			}

			svc, err = ta.c.StartService(ctx, tt.name)
			if err != nil || svc.PID == 0 || svc.PID == first.PID || svc.Status != apitype.ServiceRunning {
				t.Fatalf("StartService() = %s pid %d, %v; want running with a new pid", svc.Status, svc.PID, err)
			}
			again, err := ta.c.StartService(ctx, tt.name)
			if err != nil || again.PID != svc.PID {
				t.Errorf("StartService(running) = pid %d, %v; want the same pid %d", again.PID, err, svc.PID)
			}
			svc, err = ta.c.StopService(ctx, tt.name)
			if err != nil || svc.Status != apitype.ServiceStopped {
				t.Errorf("StopService() = %s, %v; want stopped", svc.Status, err)
			}
		})
	}

	t.Run("restarts reset", func(t *testing.T) {
		ta.put(t, apitype.ServiceSpec{Name: "flaky", Command: "exit 1",
			Restart: apitype.RestartPolicy{MaxRestarts: 2, DelayMS: 10}})
		ta.waitStatus(t, "flaky", apitype.ServiceFailed)
		svc, err := ta.c.StartService(ctx, "flaky")
		if err != nil || svc.Restarts != 0 {
			t.Fatalf("StartService(failed) = restarts %d, %v; want 0, nil", svc.Restarts, err)
		}
		svc = ta.waitStatus(t, "flaky", apitype.ServiceFailed)
		if svc.Restarts != 2 {
			t.Errorf("restarts = %d, want 2", svc.Restarts)
		}
	})

	t.Run("stop during backoff", func(t *testing.T) {
		ta.put(t, apitype.ServiceSpec{Name: "slow-retry", Command: "exit 1",
			Restart: apitype.RestartPolicy{DelayMS: apitype.MaxRestartDelayMS}})
		ta.waitStatus(t, "slow-retry", apitype.ServiceBackoff)
		svc, err := ta.c.StopService(ctx, "slow-retry")
		if err != nil || svc.Status != apitype.ServiceStopped {
			t.Errorf("StopService(backoff) = %s, %v; want stopped", svc.Status, err)
		}
	})
}

func TestServiceDelete(t *testing.T) {
	ta := startTestAgent(t, nil)
	ctx := context.Background()
	svc := ta.put(t, apitype.ServiceSpec{Name: "gone", Command: "sleep 600 & exec sleep 600"})
	if err := ta.c.DeleteService(ctx, "gone"); err != nil {
		t.Fatalf("DeleteService() = %v", err)
	}
	waitGroupGone(t, svc.PID)
	for name, err := range map[string]error{
		"Service":       func() error { _, err := ta.c.Service(ctx, "gone"); return err }(),
		"ServiceLogs":   func() error { _, err := ta.c.ServiceLogs(ctx, "gone", nil); return err }(),
		"StopService":   func() error { _, err := ta.c.StopService(ctx, "gone"); return err }(),
		"DeleteService": ta.c.DeleteService(ctx, "gone"),
	} {
		if errcode.CodeOf(err) != errcode.NotFound || errcode.ReasonOf(err) != errcode.ServiceNotFound.String() {
			t.Errorf("%s(deleted) = %v, want not_found %s", name, err, errcode.ServiceNotFound.String())
		}
	}
	if list, err := ta.c.Services(ctx); err != nil || len(list) != 0 {
		t.Errorf("Services() = %v, %v; want none", list, err)
	}
	// The name is free again, with a fresh log.
	again := ta.put(t, apitype.ServiceSpec{Name: "gone", Command: "exec sleep 600"})
	if strings.Contains(ta.logText(t, "gone"), fmt.Sprint(svc.PID)) {
		t.Errorf("a new service of a deleted one's name has its old log")
	}
	if again.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", again.Restarts)
	}
}

func TestServiceLogs(t *testing.T) {
	const buffer = 256
	ta := startTestAgent(t, func(c *Config) { c.ServiceLogBuffer = buffer })
	ctx := context.Background()

	t.Run("truncation and windows", func(t *testing.T) {
		ta.put(t, apitype.ServiceSpec{Name: "chatty", Command: "for i in $(seq 100 199); do echo line-$i; done",
			Restart: apitype.RestartPolicy{Policy: apitype.RestartNever}})
		svc := ta.waitStatus(t, "chatty", apitype.ServiceExited)
		if svc.LogBytes < 900 {
			t.Fatalf("log_bytes = %d, want all 100 lines counted", svc.LogBytes)
		}
		all, err := ta.c.ServiceLogs(ctx, "chatty", url.Values{"offset": {"0"}})
		if err != nil {
			t.Fatal(err)
		}
		if !all.Truncated || !all.Done || all.Offset != svc.LogBytes-buffer || all.NextOffset != svc.LogBytes || len(all.Data) != buffer {
			t.Errorf("logs from 0 = truncated %v, done %v, [%d, %d), %d bytes; want true, true, [%d, %d), %d",
				all.Truncated, all.Done, all.Offset, all.NextOffset, len(all.Data), svc.LogBytes-buffer, svc.LogBytes, buffer)
		}
		if !strings.Contains(all.Data, "line-199\n[berth] service exited with code 0; not restarting (policy never)\n") {
			t.Errorf("log tail = %q, want the last line and the exit", all.Data)
		}
		win, err := ta.c.ServiceLogs(ctx, "chatty", url.Values{"offset": {strconv.FormatInt(all.Offset+10, 10)}, "max_bytes": {"5"}})
		if err != nil {
			t.Fatal(err)
		}
		if win.Truncated || win.Offset != all.Offset+10 || win.NextOffset != all.Offset+15 || win.Data != all.Data[10:15] {
			t.Errorf("window = %+v, want %q at [%d, %d)", win, all.Data[10:15], all.Offset+10, all.Offset+15)
		}
		end, err := ta.c.ServiceLogs(ctx, "chatty", url.Values{"offset": {"999999"}, "wait_ms": {"60000"}})
		if err != nil {
			t.Fatal(err)
		}
		if end.Data != "" || end.Offset != svc.LogBytes || end.NextOffset != svc.LogBytes || !end.Done {
			t.Errorf("logs past the end of an exited service = %+v, want empty and done at %d", end, svc.LogBytes)
		}
		if _, err := ta.c.ServiceLogs(ctx, "chatty", url.Values{"offset": {"-1"}}); errcode.CodeOf(err) != errcode.Invalid {
			t.Errorf("ServiceLogs(offset -1) = %v, want invalid", err)
		}
	})

	t.Run("long poll", func(t *testing.T) {
		// The service waits for a file the test makes, so the first poll
		// surely waits.
		ta.put(t, apitype.ServiceSpec{Name: "late", Command: "while [ ! -e go ]; do sleep 0.05; done; echo late; exec sleep 600"})
		svc := ta.waitStatus(t, "late", apitype.ServiceRunning)
		ta.waitService(t, "late", "logged its start", func(s apitype.Service) bool { return s.LogBytes > 0 })
		svc, _ = ta.c.Service(ctx, "late")
		type result struct {
			l   apitype.ServiceLogs
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := ta.c.ServiceLogs(ctx, "late", url.Values{"offset": {strconv.FormatInt(svc.LogBytes, 10)}, "wait_ms": {"60000"}})
			got <- result{l, err}
		}()
		if err := os.WriteFile(filepath.Join(ta.ws, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil || r.l.Data != "late\n" || r.l.Offset != svc.LogBytes || r.l.Done {
			t.Errorf("long poll = %+v, %v; want \"late\\n\" at %d, not done", r.l, r.err, svc.LogBytes)
		}

		// A stop ends a wait at the end of the log.
		svc, _ = ta.c.Service(ctx, "late")
		go func() {
			l, err := ta.c.ServiceLogs(ctx, "late", url.Values{"offset": {"999999"}, "wait_ms": {"60000"}})
			got <- result{l, err}
		}()
		if _, err := ta.c.StopService(ctx, "late"); err != nil {
			t.Fatal(err)
		}
		for {
			r = <-got
			if r.err != nil || r.l.Done {
				break
			}
			// Woken by the stop lines before the end: poll on.
			go func() {
				l, err := ta.c.ServiceLogs(ctx, "late", url.Values{"offset": {strconv.FormatInt(r.l.NextOffset, 10)}, "wait_ms": {"60000"}})
				got <- result{l, err}
			}()
		}
		if r.err != nil || !r.l.Done {
			t.Errorf("wait across a stop = %+v, %v; want done", r.l, r.err)
		}
	})

	t.Run("binary", func(t *testing.T) {
		ta.put(t, apitype.ServiceSpec{Name: "binary", Command: `printf 'x\377\376y\n'`, Restart: apitype.RestartPolicy{Policy: apitype.RestartNever}})
		ta.waitStatus(t, "binary", apitype.ServiceExited)
		l, err := ta.c.ServiceLogs(ctx, "binary", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(l.DataBase64)
		if err != nil || l.Data != "" || !strings.Contains(string(b), "x\377\376y\n") {
			t.Errorf("binary log = data %q, data_base64 %q; want the bytes in base64 only", l.Data, l.DataBase64)
		}
	})

	t.Run("stdout and stderr", func(t *testing.T) {
		ta.put(t, apitype.ServiceSpec{Name: "both", Command: "echo out; echo err >&2; echo out2",
			Restart: apitype.RestartPolicy{Policy: apitype.RestartNever}})
		ta.waitStatus(t, "both", apitype.ServiceExited)
		if log := ta.logText(t, "both"); !strings.Contains(log, "out\nerr\nout2\n") {
			t.Errorf("log = %q, want both streams in order", log)
		}
	})
}

// TestServiceNotReaped checks that the orphan reaper counts services'
// processes as owned: it must not take their exits from their supervisors.
func TestServiceNotReaped(t *testing.T) {
	ta := startTestAgent(t, nil)
	svc := ta.put(t, apitype.ServiceSpec{Name: "long", Command: "exec sleep 600"})
	if own := ta.a.commandPIDs(); !own[svc.PID] {
		t.Errorf("owned PIDs %v lack the service's %d", own, svc.PID)
	}

	// A crash loop while the reaper runs without pause: every exit must
	// reach the supervisor with its code.
	stop := make(chan struct{})
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for {
			select {
			case <-stop:
				return
			default:
				ta.a.reapOrphans()
			}
		}
	}()
	ta.put(t, apitype.ServiceSpec{Name: "loop", Command: "exit 7",
		Restart: apitype.RestartPolicy{Policy: apitype.RestartAlways, MaxRestarts: 8, DelayMS: 1}})
	loop := ta.waitStatus(t, "loop", apitype.ServiceFailed)
	close(stop)
	<-reaped
	if loop.Restarts != 8 || loop.Reason != ReasonMaxRestarts {
		t.Errorf("loop = restarts %d, reason %q; want 8, %q", loop.Restarts, loop.Reason, ReasonMaxRestarts)
	}
	if log := ta.logText(t, "loop"); strings.Count(log, "service exited with code 7;") != 9 {
		t.Errorf("log does not show 9 exits with code 7:\n%s", log)
	}
	if cur, err := ta.c.Service(context.Background(), "long"); err != nil || cur.PID != svc.PID || cur.Status != apitype.ServiceRunning {
		t.Errorf("long-running service after the reaper = %s pid %d, %v; want running pid %d", cur.Status, cur.PID, err, svc.PID)
	}
}

func TestServiceShutdown(t *testing.T) {
	ta := startTestAgent(t, nil)
	var pgids []int
	for _, spec := range []apitype.ServiceSpec{
		{Name: "plain", Command: "sleep 600 & exec sleep 600"},
		{Name: "stubborn", Command: "trap '' TERM; sleep 600 & exec sleep 600"},
		{Name: "backoff", Command: "exit 1", Restart: apitype.RestartPolicy{DelayMS: apitype.MaxRestartDelayMS}},
	} {
		ta.put(t, spec)
	}
	for _, name := range []string{"plain", "stubborn"} {
		svc := ta.waitService(t, name, "two processes", func(s apitype.Service) bool { return len(groupMembers(s.PID)) == 2 })
		pgids = append(pgids, svc.PID)
	}
	ta.waitStatus(t, "backoff", apitype.ServiceBackoff)
	// The stop checks that the test process has no child left and no
	// supervisor goroutine runs.
	ta.stop()
	for _, pgid := range pgids {
		if left := groupMembers(pgid); len(left) > 0 {
			t.Errorf("process group %d has %v after shutdown", pgid, left)
		}
	}
	if _, _, err := ta.c.PutService(context.Background(), apitype.ServiceSpec{Name: "late", Command: "true"}); err == nil {
		t.Errorf("PutService after shutdown = nil, want an error")
	}
}

// freePort returns a loopback TCP port nothing listens on now.
// (testenv has one, but imports this package.)
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
