package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/testenv"
)

func poolReady(t *testing.T, d *testenv.Daemon) (ready int, sys apitype.System) {
	t.Helper()
	sys, err := d.Client.System(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sys.Pools {
		ready += p.Ready
	}
	return ready, sys
}

func sandboxDirs(t *testing.T, d *testenv.Daemon) map[string]bool {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(d.DataDir, "sandboxes"))
	out := map[string]bool{}
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// TestWarmPoolClaimAndRefill: a create claims a started sandbox, which
// takes the caller's name, env and labels; the pool refills; pool members
// are not listed; concurrent claims get distinct sandboxes.
func TestWarmPoolClaimAndRefill(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.WarmPools = []sandbox.PoolSpec{{Template: "base", Size: 2}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testenv.Eventually(t, 60*time.Second, "the pool to fill", func() bool { n, _ := poolReady(t, d); return n == 2 })
	_, sys := poolReady(t, d)
	if len(sys.Pools) != 1 || sys.Pools[0].Template != "base" || sys.Pools[0].Size != 2 || sys.Counts.Pooled != 2 || sys.Counts.Sandboxes != 0 {
		t.Fatalf("system = pools %+v counts %+v, want base 2/2 pooled, no sandboxes", sys.Pools, sys.Counts)
	}
	if list, err := d.Client.ListSandboxes(ctx); err != nil || len(list) != 0 {
		t.Fatalf("ListSandboxes with only pool members = %v, %v; want none", list, err)
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `berth_warm_pool_ready{template="base"} 2`) {
		t.Errorf("metrics lack the pool gauge at 2:\n%s", grepLines(string(metrics), "berth_"))
	}
	before := sandboxDirs(t, d)
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "claimed", Env: map[string]string{"GREETING": "hi"},
		Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !before[sb.ID] || sb.State != apitype.StateRunning || sb.Name != "claimed" || sb.Labels["team"] != "a" {
		t.Fatalf("created %+v; want a pre-started (one of %v), running sandbox with the name and labels asked for", sb, before)
	}
	rec, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo $GREETING"})
	if err != nil || rec.Stdout != "hi\n" {
		t.Fatalf("command in the claimed sandbox = %q, %v; want the caller's env", rec.Stdout, err)
	}
	testenv.Eventually(t, 60*time.Second, "the pool to refill", func() bool { n, _ := poolReady(t, d); return n == 2 })
	if list, _ := d.Client.ListSandboxes(ctx); len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("ListSandboxes = %v, want just the claimed sandbox", list)
	}

	// Concurrent claims never share a sandbox.
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[sb.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 4 {
		t.Errorf("4 concurrent creates got %d distinct sandboxes", len(ids))
	}
	// Custom resources do not match the pool: a fresh start.
	if testenv.Runtime() != "process" {
		sb2, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Resources: &apitype.Resources{MemoryMB: 256}})
		if err != nil || sb2.Resources == nil || sb2.Resources.MemoryMB != 256 {
			t.Errorf("create with custom resources = %+v, %v", sb2, err)
		}
	}
}

// TestWarmPoolRespectsMaxSandboxes: the pool only takes spare room; at the
// limit, a caller's create evicts a pool member instead of failing.
func TestWarmPoolRespectsMaxSandboxes(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.MaxSandboxes = 3
		c.WarmPools = []sandbox.PoolSpec{{Template: "base", Size: 3}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testenv.Eventually(t, 60*time.Second, "the pool to fill", func() bool { n, _ := poolReady(t, d); return n == 3 })
	req := apitype.CreateSandboxRequest{}
	if testenv.Runtime() != "process" {
		// Resources the pool does not have: no claim, so each create
		// takes room the pool must give up.
		req.Resources = &apitype.Resources{MemoryMB: 256}
	}
	for i := range 3 {
		if _, err := d.Client.CreateSandbox(ctx, req); err != nil {
			t.Fatalf("create %d at the limit with a full pool: %v", i, err)
		}
		_, sys := poolReady(t, d)
		if sys.Counts.Sandboxes+sys.Counts.Pooled > 3 {
			t.Errorf("after create %d: %d sandboxes + %d pooled, more than --max-sandboxes 3", i, sys.Counts.Sandboxes, sys.Counts.Pooled)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a refill tick: it must find no room
	if n, sys := poolReady(t, d); n != 0 || sys.Counts.Sandboxes != 3 {
		t.Errorf("at the limit: pool ready %d, sandboxes %d; want 0 and 3", n, sys.Counts.Sandboxes)
	}
	if _, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{}); err == nil {
		t.Error("a fourth create succeeded past --max-sandboxes 3")
	}
}

// TestCreateByNameIsIdempotentUnderConcurrency: many concurrent creates of
// one name make one sandbox; exactly one answer is 201, the others 200
// with the same sandbox.
func TestCreateByNameIsIdempotentUnderConcurrency(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	for _, pooled := range []bool{false, true} {
		t.Run(map[bool]string{false: "fresh", true: "pooled"}[pooled], func(t *testing.T) {
			t.Parallel()
			d := testenv.StartDaemon(t, func(c *daemon.Config) {
				if pooled {
					c.WarmPools = []sandbox.PoolSpec{{Template: "base", Size: 3}}
				}
			})
			if pooled {
				testenv.Eventually(t, 60*time.Second, "the pool to fill", func() bool { n, _ := poolReady(t, d); return n == 3 })
			}
			const n = 8
			type answer struct {
				status int
				id     string
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					body, _ := json.Marshal(apitype.CreateSandboxRequest{Name: "the-one"})
					req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/sandboxes", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+d.Token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					var sb apitype.Sandbox
					_ = json.NewDecoder(resp.Body).Decode(&sb)
					answers[i] = answer{resp.StatusCode, sb.ID}
				})
			}
			wg.Wait()
			created := 0
			for _, a := range answers {
				if a.status == http.StatusCreated {
					created++
				} else if a.status != http.StatusOK {
					t.Errorf("answer %+v, want 200 or 201", a)
				}
				if a.id == "" || a.id != answers[0].id {
					t.Errorf("answers %+v: not all the same sandbox", answers)
					break
				}
			}
			if created != 1 {
				t.Errorf("%d answers were 201, want exactly 1: %+v", created, answers)
			}
			list, err := d.Client.ListSandboxes(context.Background())
			if err != nil || len(list) != 1 {
				t.Errorf("ListSandboxes = %d sandboxes, %v; want 1", len(list), err)
			}
		})
	}
}

func grepLines(s, substr string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestWarmPoolMissingTemplate: a pool whose template does not exist says
// why it is empty and does not hold up the other pools; once the template
// is built, the pool fills without waiting out its backoff.
func TestWarmPoolMissingTemplate(t *testing.T) {
	// The pool's backoff and its wake are the sandbox manager's, whatever
	// the runtime; the template build needs an isolated one.
	testenv.OneIsolatedPass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.WarmPools = []sandbox.PoolSpec{{Template: "toolbox", Size: 1}, {Template: "base", Size: 1}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := func(name string) apitype.Pool {
		_, sys := poolReady(t, d)
		for _, p := range sys.Pools {
			if p.Template == name {
				return p
			}
		}
		t.Fatalf("no pool %q in %+v", name, sys.Pools)
		return apitype.Pool{}
	}
	// The control: the pool after the failing one fills.
	testenv.Eventually(t, 60*time.Second, "the base pool to fill", func() bool { return pool("base").Ready == 1 })
	testenv.Eventually(t, 30*time.Second, "the toolbox pool to say why it is empty", func() bool {
		return pool("toolbox").Reason == "template_not_found"
	})
	if p := pool("toolbox"); p.Ready != 0 || p.Failures < 1 || !strings.Contains(p.Message, "toolbox") {
		t.Errorf("toolbox pool = %+v, want empty, with its failures and a message naming the template", p)
	}
	// Let the backoff reach its minute, far past the wait below, then build.
	testenv.Eventually(t, 2*time.Minute, "seven refill failures", func() bool { return pool("toolbox").Failures >= 7 })
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "toolbox",
		Steps: []apitype.TemplateStep{{Run: "true"}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the toolbox template to be ready", func() bool {
		tp, err := d.Client.Template(ctx, "toolbox")
		return err == nil && tp.State == apitype.TemplateReady
	})
	testenv.Eventually(t, 14*time.Second, "the toolbox pool to fill once its template is ready", func() bool {
		p := pool("toolbox")
		return p.Ready == 1 && p.Reason == "" && p.Failures == 0
	})
}
