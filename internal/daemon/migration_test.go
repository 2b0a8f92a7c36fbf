package daemon_test

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestMigrationFromPreviousRelease starts today's daemon on a data
// directory the release before tenants made (testdata/prev-release): its
// keys work, its execution key and everything it made are the default
// tenant's, names are kept, and a new tenant sees none of it. (Its upload,
// which no job names, is past the hour an upload waits and is swept at
// start; the store's migration test checks files' owners.)
func TestMigrationFromPreviousRelease(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	src := filepath.Join("testdata", "prev-release")
	dir := filepath.Join(testenv.ShortTempDir(t), "d")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	gz, err := os.Open(filepath.Join(src, "berth.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	copyTo(t, zr, filepath.Join(dir, daemon.DBFile), 0o600)
	for _, name := range []string{daemon.KeyFile} {
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		copyTo(t, f, filepath.Join(dir, name), 0o600)
		f.Close()
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	ids := strings.Fields(read("sandboxes"))
	execKey := read("exec.key")

	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.DataDir = dir })
	ctx := context.Background()
	// The old admin key is still the admin key.
	keys, err := d.Client.ListKeys(ctx)
	if err != nil {
		t.Fatalf("ListKeys with the previous release's admin key: %v", err)
	}
	for _, k := range keys {
		want := "ten_default"
		if k.Scope == auth.ScopeAdmin {
			want = ""
		}
		if k.Tenant != want {
			t.Errorf("key %s (%s) has tenant %q after the migration, want %q", k.Name, k.Scope, k.Tenant, want)
		}
	}
	// The old execution key sees what existed, names included.
	old := client.New(d.URL, execKey)
	list, err := old.ListSandboxes(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSandboxes with the old execution key = %d, %v, want the 2 it could see before", len(list), err)
	}
	again, err := old.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "chat-42", Lazy: true})
	if err != nil || again.ID != ids[0] {
		t.Errorf("CreateSandbox chat-42 with the old key = %s, %v, want the existing %s", again.ID, err, ids[0])
	}
	ten, err := d.Client.GetTenant(ctx, "default")
	if err != nil || ten.Usage == nil || ten.Usage.Sandboxes != 2 {
		t.Errorf("GetTenant(default) = %+v, %v, want 2 sandboxes in use", ten, err)
	}
	// A new tenant sees none of it.
	_, k := tenantKey(t, d, "newcomer", auth.ScopeExecution)
	nc := client.New(d.URL, k.Secret)
	if list, err := nc.ListSandboxes(ctx); err != nil || len(list) != 0 {
		t.Errorf("ListSandboxes as a new tenant = %d, %v, want none", len(list), err)
	}
	for _, id := range ids {
		if _, err := nc.GetSandbox(ctx, id); !client.IsCode(err, errcode.NotFound) {
			t.Errorf("GetSandbox(%s) as a new tenant = %v, want not_found", id, err)
		}
	}
}

func copyTo(t *testing.T, r io.Reader, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
