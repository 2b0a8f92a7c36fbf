package main_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestServiceAndPreview runs the README's web-app tour: a service, its
// logs, the port through the API and a preview link.
func TestServiceAndPreview(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.PreviewDomain = "localhost" })
	c := newCLI(t, d)
	id := c.newSandbox()
	port := testenv.FreePort(t)
	p := strconv.Itoa(port)

	r := c.ok("service", "run", id, "web", "--port", p, "--ready-tcp", "--restart", "always", "--",
		"python3", "-m", "http.server", p, "--bind", "127.0.0.1")
	if !strings.HasPrefix(r.stdout, "web ") {
		t.Errorf("service run printed %q", r.stdout)
	}
	testenv.Eventually(t, 30*time.Second, "the service to be ready", func() bool {
		return strings.Contains(c.ok("service", "ls", id).stdout, "running  ") &&
			strings.Contains(c.ok("service", "get", id, "web").stdout, `"ready": true`)
	})
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/sandboxes/"+id+"/ports/"+p+"/", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET through the port = %v, %v", resp, err)
	}
	resp.Body.Close()
	testenv.Eventually(t, 10*time.Second, "the request in the service's log", func() bool {
		return strings.Contains(c.ok("service", "logs", id, "web").stdout, `"GET / HTTP/1.1" 200`)
	})
	// Ctrl-C on a follow ends it quietly, as a shell would: 130, no error.
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd, _, stderr := c.command(ctx, "", "service", "logs", "-f", id, "web")
		stdout := &lockedBuffer{}
		cmd.Stdout = stdout
		code := interrupt(t, cmd, "logs -f to print the log", func() bool { return strings.Contains(stdout.String(), `"GET / HTTP/1.1" 200`) })
		if code != 130 || stderr.Len() > 0 {
			t.Errorf("service logs -f interrupted: exit %d, want 130 and nothing on stderr; stderr: %q", code, stderr)
		}
	}()
	if link := c.ok("sandbox", "preview", id, p).stdout; !strings.Contains(link, "/__berth/auth?") || !strings.Contains(link, p+"-sbx-") {
		t.Errorf("sandbox preview printed %q, want a signed link to the port's host", link)
	}
	c.fails(2, "PORT", "sandbox", "preview", id, "eighty")
	c.fails(1, "port_invalid", "sandbox", "preview", id, "70000")

	// A change prints a short line; --json the record; get the record.
	if st := c.ok("service", "stop", id, "web").stdout; st != "web stopped\n" {
		t.Errorf("service stop printed %q, want %q", st, "web stopped\n")
	}
	if st := c.ok("service", "get", id, "web").stdout; !strings.Contains(st, `"status": "stopped"`) {
		t.Errorf("service get printed %s", st)
	}
	if st := c.ok("service", "start", id, "web", "--json").stdout; !strings.Contains(st, `"name": "web"`) {
		t.Errorf("service start --json printed %s", st)
	}
	if st := c.ok("service", "rm", id, "web").stdout; st != "web\n" {
		t.Errorf("service rm printed %q, want %q", st, "web\n")
	}
	c.fails(1, "service_not_found", "service", "get", id, "web")
	c.fails(1, "invalid", "service", "run", id, "Bad_Name", "--", "true")
	c.fails(2, "", "service", "run", id, "web")
}

// TestTemplateCommands builds a template with a copied file and starts a
// sandbox from it, through the CLI.
func TestTemplateCommands(t *testing.T) {
	// The CLI's plumbing: templates need an isolated runtime, not a
	// particular one (internal/daemon's template tests run on each).
	testenv.OneIsolatedPass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	if err := os.WriteFile(filepath.Join(c.dir, "notes.txt"), []byte("seeded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.ok("template", "build", "notes", "--copy", "notes.txt:notes.txt", "--run", "echo built > built.txt", "-e", "NOTES=1")
	if !strings.HasPrefix(r.stdout, "notes ready") {
		t.Errorf("template build printed %q", r.stdout)
	}
	if ls := c.ok("template", "ls").stdout; !strings.Contains(ls, "base") || !strings.Contains(ls, "notes") {
		t.Errorf("template ls = %q", ls)
	}
	if log := c.ok("template", "log", "notes").stdout; !strings.Contains(log, "==> step 2: echo built") {
		t.Errorf("template log = %q", log)
	}
	id := strings.TrimSpace(c.ok("sandbox", "create", "--template", "notes").stdout)
	if out := c.ok("exec", id, "--", "sh", "-c", "cat /template/notes.txt /template/built.txt; echo $NOTES").stdout; out != "seeded\nbuilt\n1\n" {
		t.Errorf("in a sandbox of the template: %q", out)
	}
	c.fails(1, "template_in_use", "template", "rm", "notes")
	c.ok("sandbox", "rm", id)
	// rm takes several names, as sandbox rm does, printing each it removed.
	if r := c.fails(1, "template_not_found", "template", "rm", "notes", "nope"); r.stdout != "notes\n" {
		t.Errorf("template rm notes nope printed %q, want the one it removed", r.stdout)
	}
	c.fails(1, "template_not_found", "template", "get", "notes")
	r = c.run("template", "build", "broken", "--run", "exit 7")
	if r.code != 1 || !strings.Contains(r.stderr, "code 7") {
		t.Errorf("%v\nwant exit 1 naming the failed step", r)
	}
	c.fails(1, "image_invalid", "template", "import", "x", "/dev/null")
}

// TestBrowserCommands runs the browser CLI against a real page.
func TestBrowserCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedChromium(t)
	if testenv.Runtime() != "process" {
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><title>CLI page</title><label for=q>Query</label><input id=q>
<button onclick="document.title = 'got ' + document.getElementById('q').value">Search</button>`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	id := strings.TrimSpace(c.ok("browser", "open", "--viewport", "640x480").stdout)
	if !strings.HasPrefix(id, "brs_") {
		t.Fatalf("browser open printed %q", id)
	}
	c.ok("browser", "goto", id, srv.URL+"/")
	snap := c.ok("browser", "snapshot", id).stdout
	if !strings.Contains(snap, `textbox "Query"`) || !strings.Contains(snap, `button "Search" [ref=`) {
		t.Errorf("snapshot = %q", snap)
	}
	c.ok("browser", "fill", id, "label=Query", "cats")
	c.ok("browser", "click", id, "role=button:Search")
	if got := strings.TrimSpace(c.ok("browser", "eval", id, "document.title").stdout); got != `"got cats"` {
		t.Errorf("eval document.title = %s", got)
	}
	c.ok("browser", "press", id, "Tab")
	file := filepath.Join(c.dir, "page.png")
	c.ok("browser", "shot", id, file)
	if b, err := os.ReadFile(file); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("shot wrote %d bytes, %v", len(b), err)
	}
	if ls := c.ok("browser", "ls").stdout; !strings.Contains(ls, id) || !strings.Contains(ls, "open") {
		t.Errorf("browser ls = %q", ls)
	}
	c.fails(1, "url_blocked", "browser", "goto", id, "file:///etc/passwd")
	c.fails(1, "target_not_found", "browser", "click", id, "#missing", "--timeout", "2s")
	c.fails(2, "WIDTHxHEIGHT", "browser", "open", "--viewport", "big")
	c.ok("browser", "close", id)
	c.fails(1, "session_not_found", "browser", "close", id)

	// A process session: the CDP URL a Playwright user connects to.
	r := c.ok("browser", "open", "--mode", "process")
	pid := strings.TrimSpace(r.stdout)
	if want := "cdp: ws" + strings.TrimPrefix(d.URL, "http") + "/v1/browser/sessions/" + pid + "/cdp\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("browser open --mode process printed %q on stderr, want %q", r.stderr, want)
	}
	c.ok("browser", "close", pid)
}

// lockedBuffer is a bytes.Buffer a running command writes while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
