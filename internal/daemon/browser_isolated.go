package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/sandbox"
)

// isolatedBrowsers makes the sandboxes of isolated browser sessions:
// internal sandboxes (unlisted, owned by no tenant, deleted at shutdown)
// of an isolated runtime, on the egress network with the default policy
// (public destinations on the daemon's default ports), never idle-paused
// while their session lives.
type isolatedBrowsers struct {
	mgr     *sandbox.Manager
	runtime string
}

var _ browser.Sandboxes = isolatedBrowsers{}

// isolatedBrowsersOf returns what makes isolated browser sessions'
// sandboxes, or nil (logged) when this daemon cannot: the runtime
// (--browser-isolated-runtime, default container) is unavailable here, or
// the daemon serves no egress network. A runtime other than container
// or gvisor is an error.
func isolatedBrowsersOf(cfg Config, mgr *sandbox.Manager, egress bool, log *slog.Logger) (browser.Sandboxes, error) {
	name := cfg.BrowserIsolatedRuntime
	if name == "" {
		name = "container"
	}
	if name != "container" && name != "gvisor" {
		return nil, errcode.InvalidFields(map[string]string{"browser_isolated_runtime": fmt.Sprintf("%q: must be container or gvisor", name)})
	}
	for _, rt := range mgr.Runtimes() {
		if rt.Name() != name {
			continue
		}
		if err := rt.Available(); err != nil {
			log.Info("isolated browser sessions unavailable", "runtime", name, "why", err.Error())
			return nil, nil
		}
		if !egress {
			log.Info("isolated browser sessions unavailable", "why", "the daemon serves no egress network")
			return nil, nil
		}
		log.Info("isolated browser sessions available", "runtime", name, "warm", cfg.BrowserIsolatedWarm)
		return isolatedBrowsers{mgr: mgr, runtime: name}, nil
	}
	return nil, nil
}

// hostWarmContexts is the browser manager's WarmContexts: in tenant mode,
// which refuses browsers on the host, none (and no shared browser started
// ahead); else cfg.BrowserWarmContexts (0: the default).
func hostWarmContexts(cfg Config) int {
	if cfg.TenantMode {
		return -1
	}
	return cfg.BrowserWarmContexts
}

// browserResources are an isolated browser's sandbox's limits: room for
// Chromium with a few pages; the profile counts in DiskMB.
var browserResources = sandbox.Resources{CPUs: 1, MemoryMB: 1024, Pids: 512, DiskMB: 1024, ShmMB: 256}

// browserInternal is the internal name of isolated browsers' sandboxes
// (sandbox.CreateSpec.Internal).
const browserInternal = "browser"

// browserService is the name of the service Chromium runs as.
const browserService = "chromium"

// isolatedBrowserReady bounds the wait for Chromium to answer.
const isolatedBrowserReady = 60 * time.Second

// StartBrowser implements browser.Sandboxes.
func (a isolatedBrowsers) StartBrowser(ctx context.Context, spec browser.BrowserSandbox) (_ string, err error) {
	sb, _, err := a.mgr.Create(ctx, sandbox.CreateSpec{Runtime: a.runtime, Internal: browserInternal, Resources: browserResources,
		Idle: &sandbox.IdlePolicy{}, Network: netpolicy.Policy{Mode: netpolicy.ModeEgress}})
	if err != nil {
		return "", errcode.Wrap(errcode.Unavailable, err, "making the isolated browser's sandbox failed")
	}
	defer func() {
		if err != nil {
			_ = a.DeleteBrowser(context.WithoutCancel(ctx), sb.ID)
		}
	}()
	c, err := a.mgr.Agent(ctx, sb.ID)
	if err != nil {
		return "", err
	}
	if _, _, err := c.PutService(ctx, apitype.ServiceSpec{Name: browserService, Argv: spec.Argv, Env: spec.Env,
		Port: spec.Port, Restart: apitype.RestartPolicy{Policy: "never"}}); err != nil {
		return "", fmt.Errorf("starting Chromium in sandbox %s: %w", sb.ID, err)
	}
	deadline := time.Now().Add(isolatedBrowserReady)
	for {
		resp, err := c.Port(ctx, http.MethodGet, spec.Port, spec.ReadyPath, "", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sb.ID, nil
			}
		}
		if svc, serr := c.Service(ctx, browserService); serr == nil && svc.Status != apitype.ServiceRunning && svc.Status != apitype.ServiceStarting {
			logs, _ := c.ServiceLogs(ctx, browserService, nil)
			return "", errcode.New(errcode.Unavailable, "Chromium exited in the isolated browser's sandbox (%s): %s", svc.Status, tail(logs.Data, 400))
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if time.Now().After(deadline) {
			return "", errcode.New(errcode.Unavailable, "Chromium did not answer in the isolated browser's sandbox within %s", isolatedBrowserReady)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// PortProxy implements browser.Sandboxes: requests go through the
// sandbox's agent, as port previews do, never over a network.
func (a isolatedBrowsers) PortProxy(ctx context.Context, id string, port int) (http.Handler, error) {
	c, err := a.mgr.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	rp := c.Proxy(func(in *http.Request) string { return agent.PortPath(port, in.URL.EscapedPath()) }, nil)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			http.Error(w, "the isolated browser's sandbox is not answering", http.StatusBadGateway)
		}
	}
	return rp, nil
}

// DeleteBrowser implements browser.Sandboxes.
func (a isolatedBrowsers) DeleteBrowser(ctx context.Context, id string) error {
	if err := a.mgr.Delete(ctx, id); err != nil && !errcode.Is(err, errcode.NotFound) {
		return err
	}
	return nil
}

// DeleteAllBrowsers implements browser.Sandboxes.
func (a isolatedBrowsers) DeleteAllBrowsers(ctx context.Context) (int, error) {
	all, err := a.mgr.Internal(ctx, browserInternal)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sb := range all {
		if err := a.DeleteBrowser(ctx, sb.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
