package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/cluster"
)

// Cluster is a cluster's HQ and its workers, each a real berth process
// (StartDaemonProcess), over a real Postgres (Postgres).
type Cluster struct {
	t       testing.TB
	Dir     string
	DSN     string
	Secret  []byte
	HQ      *Daemon
	Ports   map[string]int     // worker: its port on 127.0.0.1
	Workers map[string]*Daemon // worker: its process (Client is nil: its key opens nothing)
	Tenants map[string]string  // worker: the tenant it is dedicated to
	// WorkerArgs are more flags for every worker, DedicatedArgs for
	// those dedicated to a tenant.
	WorkerArgs, DedicatedArgs []string
}

// ClusterSpec describes a test cluster.
type ClusterSpec struct {
	// Workers maps each worker's ID to the tenant it is dedicated to ("":
	// every tenant).
	Workers map[string]string
	// LostAfter is HQ's --worker-lost-after (0: its default).
	LostAfter time.Duration
	// DSN is the shared database ("": a new database in the test
	// Postgres).
	DSN string
	// HQArgs and WorkerArgs are more flags; DedicatedArgs more still for
	// workers dedicated to a tenant (they run in tenant mode, which needs
	// an isolated default runtime).
	HQArgs, WorkerArgs, DedicatedArgs []string
	// BeforeWorkers runs once HQ serves, before the workers start (a
	// dedicated worker's tenant must exist first).
	BeforeWorkers func(*Cluster)
}

// StartCluster starts HQ with spec's workers pinned to free ports on
// 127.0.0.1, then the workers, and waits until every worker is live. Rate
// limits are off on HQ unless HQArgs set them.
func StartCluster(t testing.TB, spec ClusterSpec) *Cluster {
	t.Helper()
	dsn := spec.DSN
	if dsn == "" {
		dsn = Postgres(t)
	}
	c := &Cluster{t: t, Dir: ShortTempDir(t), DSN: dsn, Ports: map[string]int{},
		Workers: map[string]*Daemon{}, Tenants: spec.Workers, WorkerArgs: spec.WorkerArgs,
		DedicatedArgs: spec.DedicatedArgs}
	c.Secret = []byte(cluster.NewSecret())
	secretPath := filepath.Join(c.Dir, "hq.token")
	if err := os.WriteFile(secretPath, append(c.Secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--role", "hq", "--database", c.DSN, "--service-token-file", secretPath,
		"--rate-source", "off", "--rate-key", "off", "--rate-creates", "off", "--rate-tenant", "off", "--rate-tenant-creates", "off"}
	if spec.LostAfter > 0 {
		args = append(args, "--worker-lost-after", spec.LostAfter.String())
	}
	for _, id := range c.ids() {
		c.Ports[id] = FreePort(t)
		w := fmt.Sprintf("%s=http://127.0.0.1:%d", id, c.Ports[id])
		if tenant := spec.Workers[id]; tenant != "" {
			w += ",tenant=" + tenant
		}
		args = append(args, "--worker", w)
	}
	for _, id := range append(c.ids(), "hq") {
		if err := os.MkdirAll(filepath.Join(c.Dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.HQ = StartDaemonProcess(t, filepath.Join(c.Dir, "hq", "d"), append(args, spec.HQArgs...)...)
	if spec.BeforeWorkers != nil {
		spec.BeforeWorkers(c)
	}
	for _, id := range c.ids() {
		c.StartWorker(id)
	}
	c.WaitStatus(cluster.StatusLive, c.ids()...)
	return c
}

func (c *Cluster) ids() []string {
	var out []string
	for id := range c.Tenants {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Cred is worker id's credential.
func (c *Cluster) Cred(id string) []byte { return []byte(cluster.WorkerCredential(c.Secret, id)) }

// StartWorker starts (or starts again, after Kill9) worker id on its port
// and data directory.
func (c *Cluster) StartWorker(id string) {
	c.t.Helper()
	cred := filepath.Join(c.Dir, id+".token")
	if err := os.WriteFile(cred, append(c.Cred(id), '\n'), 0o600); err != nil {
		c.t.Fatal(err)
	}
	args := []string{"--role", "worker", "--database", c.DSN, "--worker-id", id, "--service-token-file", cred,
		"--hq", c.HQ.URL, "--listen", fmt.Sprintf("127.0.0.1:%d", c.Ports[id]), "--browser-warm-contexts", "-1"}
	args = append(args, c.WorkerArgs...)
	if tn := c.Tenants[id]; tn != "" {
		args = append(append(args, "--tenant", tn), c.DedicatedArgs...)
	}
	d := StartDaemonProcess(c.t, filepath.Join(c.Dir, id, "d"), args...)
	d.Client = nil
	c.Workers[id] = d
}

// WaitStatus waits until HQ reports each of ids with status.
func (c *Cluster) WaitStatus(status string, ids ...string) {
	c.t.Helper()
	Eventually(c.t, 30*time.Second, fmt.Sprintf("workers %v %s", ids, status), func() bool {
		l, err := c.HQ.Client.ListWorkers(context.Background())
		if err != nil {
			return false
		}
		for _, w := range l.Workers {
			if slices.Contains(ids, w.ID) && w.Status != status {
				return false
			}
		}
		return true
	})
}

// WorkerClient is a client straight to worker id, each request signed
// with HQ's assertion for caller, as HQ forwards them.
func (c *Cluster) WorkerClient(id string, caller cluster.Caller) *client.Client {
	rt := assertingTransport{cred: c.Cred(id), worker: id, caller: caller, next: http.DefaultTransport}
	return client.New(fmt.Sprintf("http://127.0.0.1:%d", c.Ports[id]), "", client.WithHTTPClient(&http.Client{Transport: rt}))
}

type assertingTransport struct {
	cred   []byte
	worker string
	caller cluster.Caller
	next   http.RoundTripper
}

func (a assertingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	r.Header.Set(cluster.AssertionHeader, cluster.Assert(a.cred, a.worker, a.caller, r.Method, r.URL.RequestURI(), time.Now()))
	return a.next.RoundTrip(r)
}
