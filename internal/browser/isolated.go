package browser

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Isolated mode: a browser of its own in a sandbox of its own. Chromium
// runs inside an internal sandbox of an isolated runtime (container, or
// gvisor), as that sandbox's user, on the egress network (public
// destinations only, decided by Berth's egress policy like any
// sandbox's), with its profile in the sandbox's quota-bound workspace.
// Its DevTools port listens on the sandbox's own loopback, which nothing
// outside the sandbox can route to; the daemon reaches it through the
// sandbox's agent, as it reaches any port in a sandbox, and serves it to
// chromedp (and to the CDP endpoint) on a loopback bridge of its own whose
// paths carry a secret. Closing the session deletes the sandbox.

// Sandboxes is what isolated mode needs of the daemon's sandboxes. The
// daemon sets one on Config.Isolated; without one, isolated mode answers
// browser_unavailable.
type Sandboxes interface {
	// StartBrowser makes an internal sandbox for one browser and runs
	// spec's program in it as a service, returning once the program
	// answers HTTP GET spec.ReadyPath on spec.Port inside the sandbox. It
	// returns the sandbox's ID; on error it leaves nothing behind.
	StartBrowser(ctx context.Context, spec BrowserSandbox) (string, error)
	// PortProxy returns a handler that forwards each request it serves,
	// WebSocket upgrades included, to port on sandbox id's own loopback.
	PortProxy(ctx context.Context, id string, port int) (http.Handler, error)
	// DeleteBrowser deletes sandbox id with everything in it. It is
	// idempotent: a sandbox already gone is no error.
	DeleteBrowser(ctx context.Context, id string) error
	// DeleteAllBrowsers deletes every browser sandbox there is (those a
	// daemon that died left: sessions do not outlive their daemon) and
	// says how many. Manager.Start calls it before making any.
	DeleteAllBrowsers(ctx context.Context) (int, error)
}

// BrowserSandbox is the program StartBrowser runs in a new sandbox.
type BrowserSandbox struct {
	Argv      []string
	Env       map[string]string
	Port      int
	ReadyPath string
}

// Isolated mode's constants.
const (
	// DevToolsPort is the port Chromium's DevTools listen on, on the
	// sandbox's own loopback.
	DevToolsPort = 9222
	// sandboxWorkspace is the workspace directory inside a sandbox of an
	// isolated runtime (sandbox.MountPoints): the profile lives there, so
	// it counts in the sandbox's disk quota and goes with the sandbox.
	sandboxWorkspace = "/workspace"
	// isolatedStartTimeout bounds starting one isolated browser: the
	// sandbox, Chromium, and the first page.
	isolatedStartTimeout = 90 * time.Second
)

// isolatedProfile is the profile directory of an isolated browser, inside
// its sandbox.
var isolatedProfile = path.Join(sandboxWorkspace, ".berth-browser")

// isolatedBrowser is one Chromium in a sandbox of its own, connected: a
// pool member until a session claims it, then that session's alone.
type isolatedBrowser struct {
	m         *Manager
	sandboxID string
	srv       *http.Server // the loopback bridge to the DevTools port
	wsURL     string       // the browser's CDP WebSocket, through the bridge
	cancel    context.CancelFunc
	t         *tab            // the first page
	lost      <-chan struct{} // closed when the connection to the browser ends
	closeOnce sync.Once
}

// isolatedArgv is the command line of an isolated browser. Chromium's own
// sandbox is off (--no-sandbox): it needs user namespaces or a setuid
// helper, which the sandbox's seccomp filter and no-new-privileges refuse;
// the Berth sandbox around it (its own user, network namespace, cgroup,
// read-only root) is the boundary instead. The DevTools port listens on
// the sandbox's loopback only, and without --remote-allow-origins it
// refuses every WebSocket a web page opens (pages send an Origin).
func isolatedArgv(chromium string) []string {
	return []string{chromium,
		"--headless", "--no-sandbox", "--disable-gpu",
		"--remote-debugging-address=127.0.0.1", fmt.Sprintf("--remote-debugging-port=%d", DevToolsPort),
		"--user-data-dir=" + isolatedProfile,
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
		"--disable-breakpad", "--disable-client-side-phishing-detection", "--disable-hang-monitor",
		"--disable-ipc-flooding-protection", "--disable-prompt-on-repost", "--metrics-recording-only",
		"--password-store=basic", "--use-mock-keychain", "--mute-audio", "--hide-scrollbars",
		// The egress network carries TCP only.
		"--disable-quic", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
		// Sessions run in the background: never throttle an unseen page.
		"--disable-background-timer-throttling", "--disable-renderer-backgrounding",
		"--disable-backgrounding-occluded-windows",
		"--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
		"about:blank",
	}
}

// isolatedEnv is the whole environment of an isolated browser (the agent
// adds its fixed base, which this overrides): env.go's allowlist without
// any of the daemon's variables, and a private home in the profile.
func isolatedEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range chromiumEnv(isolatedProfile, nil) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// IsolatedAvailable says whether isolated sessions can open here: nil,
// or an error (browser_unavailable) saying why not.
func (m *Manager) IsolatedAvailable() error { return m.isolatedAvailable() }

// isolatedAvailable says whether isolated sessions can open here.
func (m *Manager) isolatedAvailable() error {
	if m.cfg.Isolated == nil {
		return errcode.BrowserUnavailable.New("isolated browser sessions are not available on this daemon: they need an isolated runtime " +
			"(container or gvisor) and the egress network (berth serve as root on Linux, without --egress=false)")
	}
	return m.Available()
}

// startIsolated starts a browser in a new sandbox and connects to it, with
// one blank page. On error nothing is left.
func (m *Manager) startIsolated(ctx context.Context) (_ *isolatedBrowser, err error) {
	ctx, cancel := context.WithTimeout(ctx, isolatedStartTimeout)
	defer cancel()
	sbx := m.cfg.Isolated
	id, err := sbx.StartBrowser(ctx, BrowserSandbox{Argv: isolatedArgv(m.cfg.Chromium), Env: isolatedEnv(),
		Port: DevToolsPort, ReadyPath: "/json/version"})
	if err != nil {
		return nil, err
	}
	b := &isolatedBrowser{m: m, sandboxID: id}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	h, err := sbx.PortProxy(ctx, id, DevToolsPort)
	if err != nil {
		return nil, err
	}
	base, err := b.bridge(h)
	if err != nil {
		return nil, err
	}
	wsPath, err := browserWSPath(ctx, base)
	if err != nil {
		return nil, errcode.Wrap(errcode.Unavailable, err, "reading the isolated browser's CDP address")
	}
	b.wsURL = "ws" + strings.TrimPrefix(base, "http") + wsPath
	allocCtx, cancelAlloc := remote.NewAllocator(context.Background(), b.wsURL, remote.NoModifyURL)
	b.cancel = cancelAlloc
	t, err := makeTab(allocCtx)
	if err != nil {
		return nil, errcode.Wrap(errcode.Unavailable, err, "connecting to the isolated browser")
	}
	b.t = t
	b.lost = chromedp.FromContext(t.ctx).Browser.LostConnection
	return b, nil
}

// bridge serves the DevTools port through h on a loopback listener of the
// daemon's own, and returns its base URL. Only paths under a secret
// prefix are served, and of those only the version document and the
// browser's WebSocket: a local process that finds the port finds nothing
// it can use.
func (b *isolatedBrowser) bridge(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening for the CDP bridge: %w", err)
	}
	prefix := "/" + ident.Token("") // 256 random bits
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The prefix is a secret: compared in constant time.
		p := r.URL.Path
		if len(p) < len(prefix) || subtle.ConstantTimeCompare([]byte(p[:len(prefix)]), []byte(prefix)) != 1 {
			http.NotFound(w, r)
			return
		}
		rest := p[len(prefix):]
		if rest != "/json/version" && !strings.HasPrefix(rest, "/devtools/browser/") {
			http.NotFound(w, r)
			return
		}
		out := r.Clone(r.Context())
		out.URL.Path, out.URL.RawPath, out.RequestURI = rest, "", ""
		h.ServeHTTP(w, out)
	})}
	go func() { _ = b.srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + prefix, nil
}

// bridgeClient reads the bridge: loopback, never through a proxy.
var bridgeClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}

// browserWSPath returns the path of the browser's CDP WebSocket, from
// /json/version.
func browserWSPath(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/json/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := bridgeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/json/version answered %s", resp.Status)
	}
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil {
		return "", fmt.Errorf("decoding /json/version: %w", err)
	}
	u, err := url.Parse(v.WS)
	if err != nil || !strings.HasPrefix(u.Path, "/devtools/browser/") {
		return "", fmt.Errorf("/json/version names no browser WebSocket (%q)", v.WS)
	}
	return u.Path, nil
}

// alive reports whether the connection to the browser still stands.
func (b *isolatedBrowser) alive() bool {
	select {
	case <-b.lost:
		return false
	default:
		return true
	}
}

// close ends the connection and the bridge and deletes the sandbox, with
// the browser and its profile. It is idempotent.
func (b *isolatedBrowser) close() {
	b.closeOnce.Do(func() {
		if b.t != nil {
			b.t.cancel()
		}
		if b.cancel != nil {
			b.cancel()
		}
		if b.srv != nil {
			_ = b.srv.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.m.cfg.Isolated.DeleteBrowser(ctx, b.sandboxID); err != nil {
			b.m.log.Error("deleting an isolated browser's sandbox", "sandbox_id", b.sandboxID, "err", err)
		}
	})
}

// startIsolated gives the session a browser of its own in a sandbox: one
// from the warm pool, else one started now. A claimed browser is never
// given to another session.
func (s *Session) startIsolated(ctx context.Context) error {
	b := s.m.takeIsolated()
	if b == nil {
		var err error
		if b, err = s.m.startIsolated(ctx); err != nil {
			return openError(err)
		}
	}
	s.mu.Lock()
	s.iso = b // close deletes it, whatever happens next
	s.mu.Unlock()
	if err := s.attach(ctx, b.t); err != nil {
		return openError(err)
	}
	s.mu.Lock()
	s.root = b.t.ctx
	s.pages = []*tab{b.t}
	s.mu.Unlock()
	return nil
}
