package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
)

func newSandbox(t *testing.T, db *store.DB, name string) *sandbox.Sandbox {
	t.Helper()
	now := time.Now().UTC()
	sb := &sandbox.Sandbox{
		ID: ident.New("sbx_"), Name: name, Runtime: "process", State: apitype.StateRunning,
		Env: map[string]string{"A": "1"}, Labels: map[string]string{"team": "x"},
		AgentPID: 42, AgentToken: ident.Token("agt_"), CreatedAt: now, UpdatedAt: now,
	}
	if err := db.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatalf("CreateSandbox(%s): %v", sb.ID, err)
	}
	return sb
}

func newCommand(t *testing.T, db *store.DB, sandboxID, status string) *sandbox.CommandRecord {
	t.Helper()
	c := &sandbox.CommandRecord{
		ID: ident.New("cmd_"), SandboxID: sandboxID, Status: status, Command: "echo hi",
		Argv: []string{"/bin/sh", "-c", "echo hi"}, Cwd: "sub", TimeoutMS: 1000,
		StartedAt: time.Now().UTC(),
	}
	if status != apitype.CommandRunning {
		code := 0
		fin := c.StartedAt.Add(time.Millisecond)
		c.ExitCode, c.FinishedAt = &code, &fin
	}
	if err := db.InsertCommand(context.Background(), c); err != nil {
		t.Fatalf("InsertCommand(%s): %v", c.ID, err)
	}
	return c
}

func ids(cs []*sandbox.CommandRecord) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testOpenMigratesOnce)
}

func testOpenMigratesOnce(t *testing.T, path string) {
	ctx := context.Background()
	type migration struct{ Version, AppliedAt string }
	applied := func() []migration {
		t.Helper()
		db, err := store.Open(ctx, path)
		if err != nil {
			t.Fatalf("Open(%s): %v", path, err)
		}
		defer db.Close()
		rows, err := db.SQL().QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []migration
		for rows.Next() {
			var m migration
			if err := rows.Scan(&m.Version, &m.AppliedAt); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := applied()
	if len(first) == 0 || first[0].Version != "0001_init" {
		t.Fatalf("schema_migrations after first Open = %v, want 0001_init first", first)
	}
	for i := range 2 {
		if diff := cmp.Diff(first, applied()); diff != "" {
			t.Errorf("schema_migrations after re-open %d changed (-first +now):\n%s", i+1, diff)
		}
	}
}

func TestSQLitePragmas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTarget(t, filepath.Join(t.TempDir(), "berth.db"))
	// PRAGMAs other than journal_mode are per connection: check several
	// of the pool's connections at once, so each is a different one.
	var conns []*sql.Conn
	for range 3 {
		c, err := db.SQL().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
	}
	for i, c := range conns {
		for _, tt := range tests {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, tt.pragma, err)
			}
			if got != tt.want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, tt.pragma, got, tt.want)
			}
		}
	}
}

func TestSandboxes(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)

		a := newSandbox(t, db, "alpha")
		got, err := db.GetSandbox(ctx, a.ID)
		if err != nil {
			t.Fatalf("GetSandbox(%s): %v", a.ID, err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("GetSandbox(%s) mismatch (-want +got):\n%s", a.ID, diff)
		}
		if got, err := db.GetSandboxByName(ctx, "", "alpha"); err != nil || got.ID != a.ID {
			t.Errorf("GetSandboxByName(alpha) = %v, %v, want %s", got, err, a.ID)
		}

		dup := &sandbox.Sandbox{ID: ident.New("sbx_"), Name: "alpha", Runtime: "process", State: apitype.StatePending,
			AgentToken: "t", CreatedAt: time.Now(), UpdatedAt: time.Now()}
		err = db.CreateSandbox(ctx, dup)
		if errcode.CodeOf(err) != errcode.Conflict || errcode.ReasonOf(err) != "name_taken" {
			t.Errorf("CreateSandbox(duplicate name) = %v, want conflict name_taken", err)
		}
		// Unnamed sandboxes do not collide with each other.
		u1, u2 := newSandbox(t, db, ""), newSandbox(t, db, "")

		list, err := db.ListSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var listIDs []string
		for _, sb := range list {
			listIDs = append(listIDs, sb.ID)
		}
		if diff := cmp.Diff([]string{a.ID, u1.ID, u2.ID}, listIDs); diff != "" {
			t.Errorf("ListSandboxes IDs, oldest first (-want +got):\n%s", diff)
		}

		if err := db.SetSandboxState(ctx, a.ID, apitype.StateFailed, "boom", 0); err != nil {
			t.Fatalf("SetSandboxState: %v", err)
		}
		if got, _ := db.GetSandbox(ctx, a.ID); got.State != apitype.StateFailed || got.Reason != "boom" || got.AgentPID != 0 {
			t.Errorf("after SetSandboxState: state, reason, pid = %q, %q, %d, want failed, boom, 0", got.State, got.Reason, got.AgentPID)
		}

		tests := []struct {
			name string
			err  error
			want errcode.Code
		}{
			{"GetSandbox unknown", func() error { _, err := db.GetSandbox(ctx, "sbx_nope"); return err }(), errcode.NotFound},
			{"GetSandboxByName unknown", func() error { _, err := db.GetSandboxByName(ctx, "", "nope"); return err }(), errcode.NotFound},
			{"SetSandboxState unknown", db.SetSandboxState(ctx, "sbx_nope", apitype.StateFailed, "", 0), errcode.NotFound},
		}
		for _, tt := range tests {
			if got := errcode.CodeOf(tt.err); got != tt.want {
				t.Errorf("%s = %v, want code %s", tt.name, tt.err, tt.want)
			}
		}
	})
}

func TestCommands(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		sb := newSandbox(t, db, "")
		other := newSandbox(t, db, "")

		c1 := newCommand(t, db, sb.ID, apitype.CommandExited)
		c2 := newCommand(t, db, sb.ID, apitype.CommandRunning)
		otherCmd := newCommand(t, db, other.ID, apitype.CommandExited)
		c3 := newCommand(t, db, sb.ID, apitype.CommandFailed)

		got, err := db.GetCommand(ctx, sb.ID, c1.ID)
		if err != nil {
			t.Fatalf("GetCommand(%s): %v", c1.ID, err)
		}
		if diff := cmp.Diff(c1, got); diff != "" {
			t.Errorf("GetCommand(%s) mismatch (-want +got):\n%s", c1.ID, diff)
		}
		// A command is only found through its own sandbox.
		if _, err := db.GetCommand(ctx, other.ID, c1.ID); !errcode.Is(err, errcode.NotFound) {
			t.Errorf("GetCommand(other sandbox, %s) = %v, want not_found", c1.ID, err)
		}

		list, err := db.ListCommands(ctx, sb.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{c3.ID, c2.ID, c1.ID}, ids(list)); diff != "" {
			t.Errorf("ListCommands, newest first (-want +got):\n%s", diff)
		}
		if list, _ := db.ListCommands(ctx, sb.ID, 2); !cmp.Equal(ids(list), []string{c3.ID, c2.ID}) {
			t.Errorf("ListCommands(limit 2) = %v, want %v", ids(list), []string{c3.ID, c2.ID})
		}

		// FinishCommand stores the outcome of a running command...
		code := 7
		fin := time.Now().UTC()
		done := *c2
		done.Status, done.ExitCode, done.FinishedAt, done.StdoutBytes, done.StdoutTruncated = apitype.CommandExited, &code, &fin, 99, true
		if err := db.FinishCommand(ctx, &done, 100); err != nil {
			t.Fatalf("FinishCommand(%s): %v", c2.ID, err)
		}
		got, _ = db.GetCommand(ctx, sb.ID, c2.ID)
		if diff := cmp.Diff(&done, got); diff != "" {
			t.Errorf("after FinishCommand(%s) (-want +got):\n%s", c2.ID, diff)
		}
		// ...once: a second outcome, or one for a command that had already
		// finished, is ignored.
		for _, c := range []*sandbox.CommandRecord{c2, c1} {
			before, _ := db.GetCommand(ctx, sb.ID, c.ID)
			again := *before
			again.Status, again.Reason, again.ExitCode = apitype.CommandCanceled, "late", nil
			if err := db.FinishCommand(ctx, &again, 100); err != nil {
				t.Fatalf("FinishCommand(%s) again: %v", c.ID, err)
			}
			after, _ := db.GetCommand(ctx, sb.ID, c.ID)
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("FinishCommand(%s) on a finished command changed it (-before +after):\n%s", c.ID, diff)
			}
		}

		// Deleting a sandbox deletes its commands, and only its commands.
		if err := db.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetCommand(ctx, sb.ID, c1.ID); !errcode.Is(err, errcode.NotFound) {
			t.Errorf("GetCommand after DeleteSandbox = %v, want not_found", err)
		}
		var n int
		if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM commands WHERE sandbox_id = $1`, sb.ID).Scan(&n); err != nil || n != 0 {
			t.Errorf("commands rows of deleted sandbox = %d, %v, want 0", n, err)
		}
		if _, err := db.GetCommand(ctx, other.ID, otherCmd.ID); err != nil {
			t.Errorf("GetCommand(other sandbox) after deleting another = %v, want found", err)
		}
	})
}

func TestPruneCommands(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		// statuses are inserted oldest first; want lists the indexes that
		// remain after pruning to keep, newest first.
		tests := []struct {
			name     string
			statuses []string
			keep     int
			want     []int
		}{
			{"under the bound", []string{"exited", "exited"}, 5, []int{1, 0}},
			{"at the bound", []string{"exited", "failed", "exited"}, 3, []int{2, 1, 0}},
			{"oldest finished go", []string{"exited", "exited", "timed_out", "exited"}, 2, []int{3, 2}},
			{"running ones stay", []string{"running", "exited", "running", "exited", "canceled"}, 1, []int{4, 2, 0}},
			{"keep zero", []string{"exited", "running", "failed"}, 0, []int{1}},
			{"all running", []string{"running", "running", "running"}, 1, []int{2, 1, 0}},
		}
		// One database: each case prunes a sandbox of its own.
		db := open(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				sb := newSandbox(t, db, "")
				other := newSandbox(t, db, "")
				otherCmd := newCommand(t, db, other.ID, apitype.CommandExited)
				var cs []*sandbox.CommandRecord
				for _, s := range tt.statuses {
					cs = append(cs, newCommand(t, db, sb.ID, s))
				}
				if err := db.PruneCommands(ctx, sb.ID, tt.keep); err != nil {
					t.Fatalf("PruneCommands(keep %d): %v", tt.keep, err)
				}
				list, err := db.ListCommands(ctx, sb.ID, 100)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, i := range tt.want {
					want = append(want, cs[i].ID)
				}
				if diff := cmp.Diff(want, ids(list)); diff != "" {
					t.Errorf("PruneCommands(%v, keep %d) left (-want +got):\n%s", tt.statuses, tt.keep, diff)
				}
				if _, err := db.GetCommand(ctx, other.ID, otherCmd.ID); err != nil {
					t.Errorf("pruning one sandbox touched another: %v", err)
				}
			})
		}
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		var keys []*auth.Key
		for i := range 3 {
			secret := ident.Token(auth.KeyPrefix)
			k := &auth.Key{
				ID: ident.New("key_"), Name: fmt.Sprintf("k%d", i), Scope: auth.ScopeExecution,
				Prefix: secret[:9], Hash: auth.Hash(secret), CreatedAt: time.Now().UTC().Add(time.Duration(i) * time.Second),
			}
			if err := db.InsertKey(ctx, k); err != nil {
				t.Fatalf("InsertKey(%s): %v", k.Name, err)
			}
			keys = append(keys, k)
		}
		got, err := db.KeyByHash(ctx, keys[1].Hash)
		if err != nil {
			t.Fatalf("KeyByHash: %v", err)
		}
		if diff := cmp.Diff(keys[1], got); diff != "" {
			t.Errorf("KeyByHash mismatch (-want +got):\n%s", diff)
		}
		if _, err := db.KeyByHash(ctx, auth.Hash("bk_unknown")); !errcode.Is(err, errcode.NotFound) {
			t.Errorf("KeyByHash(unknown) = %v, want not_found", err)
		}
		dup := *keys[0]
		dup.ID = ident.New("key_")
		if err := db.InsertKey(ctx, &dup); err == nil {
			t.Errorf("InsertKey(duplicate hash) = nil, want an error")
		}

		if err := db.RevokeKey(ctx, keys[1].ID); err != nil {
			t.Fatalf("RevokeKey: %v", err)
		}
		revoked, _ := db.KeyByHash(ctx, keys[1].Hash)
		if revoked.RevokedAt == nil {
			t.Fatalf("KeyByHash after RevokeKey: revoked_at = nil, want set")
		}
		// Revoking again keeps the first revocation time (times are stored
		// with nanoseconds, so a second one would differ).
		if err := db.RevokeKey(ctx, keys[1].ID); err != nil {
			t.Fatalf("RevokeKey again: %v", err)
		}
		again, _ := db.KeyByHash(ctx, keys[1].Hash)
		if again.RevokedAt == nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
			t.Errorf("revoked_at after revoking twice = %v, want %v", again.RevokedAt, revoked.RevokedAt)
		}
		if err := db.RevokeKey(ctx, "key_nope"); !errcode.Is(err, errcode.NotFound) {
			t.Errorf("RevokeKey(unknown) = %v, want not_found", err)
		}

		list, err := db.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys[1].RevokedAt = revoked.RevokedAt
		if diff := cmp.Diff(keys, list); diff != "" {
			t.Errorf("ListKeys, oldest first (-want +got):\n%s", diff)
		}
	})
}

// TestListsAreChronological checks the oldest-first order of lists with
// creation times whose fractions differ in length: stored as text, they
// must still sort as times (".1" before ".15", a whole second before
// ".5" of it).
func TestListsAreChronological(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		offsets := []time.Duration{ // creation order, scrambled in time
			150 * time.Millisecond, 0, 500 * time.Millisecond, 100 * time.Millisecond, 123456789, 120 * time.Millisecond, time.Second,
		}
		wantOrder := []int{1, 3, 5, 4, 0, 2, 6} // indexes of offsets, oldest first

		var sandboxes, keys []string
		for i, off := range offsets {
			at := base.Add(off)
			sb := &sandbox.Sandbox{ID: ident.New("sbx_"), Runtime: "process", State: apitype.StateRunning,
				AgentToken: "t", CreatedAt: at, UpdatedAt: at}
			if err := db.CreateSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
			k := &auth.Key{ID: ident.New("key_"), Name: fmt.Sprint(i), Scope: auth.ScopeAdmin, Prefix: "bk_",
				Hash: auth.Hash(fmt.Sprint(i)), CreatedAt: at}
			if err := db.InsertKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			sandboxes, keys = append(sandboxes, sb.ID), append(keys, k.ID)
		}
		var wantSandboxes, wantKeys []string
		for _, i := range wantOrder {
			wantSandboxes, wantKeys = append(wantSandboxes, sandboxes[i]), append(wantKeys, keys[i])
		}

		sbs, err := db.ListSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var gotSandboxes []string
		for _, sb := range sbs {
			gotSandboxes = append(gotSandboxes, sb.ID)
			if want := base.Add(offsets[slices.Index(sandboxes, sb.ID)]); !sb.CreatedAt.Equal(want) {
				t.Errorf("sandbox created_at = %v, want %v", sb.CreatedAt, want)
			}
		}
		if diff := cmp.Diff(wantSandboxes, gotSandboxes); diff != "" {
			t.Errorf("ListSandboxes order (-want +got):\n%s", diff)
		}
		ks, err := db.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var gotKeys []string
		for _, k := range ks {
			gotKeys = append(gotKeys, k.ID)
		}
		if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
			t.Errorf("ListKeys order (-want +got):\n%s", diff)
		}
	})
}

func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		sb := newSandbox(t, db, "net")
		p := netpolicy.Policy{Mode: netpolicy.ModeEgress, AllowOnly: []string{"*.example.com"}, Ports: []int{443}}
		if err := db.SetSandboxNetwork(ctx, sb.ID, p); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetSandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p, got.Network); diff != "" {
			t.Errorf("network after SetSandboxNetwork (-want +got):\n%s", diff)
		}
		if err := db.SetSandboxNetwork(ctx, "sbx_nope", p); !errcode.Has(err, errcode.SandboxNotFound) {
			t.Errorf("SetSandboxNetwork(unknown) = %v, want sandbox_not_found", err)
		}

		if k, err := db.GetNetworkKeys(ctx, sb.ID); err != nil || k != nil {
			t.Fatalf("GetNetworkKeys before any = %+v, %v; want nil, nil", k, err)
		}
		want := &store.NetworkKeys{CACert: []byte("cert"), CAKey: []byte{1, 2}, Secrets: []byte{3}}
		if err := db.PutNetworkKeys(ctx, sb.ID, want); err != nil {
			t.Fatal(err)
		}
		want.Secrets = []byte{4, 5}
		if err := db.PutNetworkKeys(ctx, sb.ID, want); err != nil { // replaces
			t.Fatal(err)
		}
		k, err := db.GetNetworkKeys(ctx, sb.ID)
		if err != nil || cmp.Diff(want, k) != "" {
			t.Errorf("GetNetworkKeys = %+v, %v; want %+v", k, err, want)
		}
		if err := db.PutNetworkKeys(ctx, "sbx_nope", want); !errcode.Has(err, errcode.SandboxNotFound) {
			t.Errorf("PutNetworkKeys(unknown) = %v, want sandbox_not_found", err)
		}
		// They go with the sandbox.
		if err := db.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if k, err := db.GetNetworkKeys(ctx, sb.ID); err != nil || k != nil {
			t.Errorf("GetNetworkKeys after the sandbox's delete = %+v, %v; want nil", k, err)
		}
	})
}
