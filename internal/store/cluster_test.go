package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
)

// TestClusterStore: leases and placements, on both engines.
func TestClusterStore(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		now := time.Now().UTC().Truncate(time.Millisecond)
		lease := &cluster.Lease{ID: "w1", Incarnation: "inc_1", StartedAt: now, HeartbeatAt: now, ExpiresAt: now.Add(10 * time.Second),
			Capabilities: cluster.Capabilities{Runtimes: []string{"container"}, MaxSandboxes: 4}, Load: cluster.Load{Sandboxes: 2}}
		if err := db.RenewLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		// An operator's drain outlives the next heartbeat; a worker that
		// never beat gets a row whose lease is over.
		for _, id := range []string{"w1", "w2"} {
			if err := db.SetDraining(ctx, id, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.RenewLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		// Another incarnation's release changes nothing; its own ends it.
		if err := db.ReleaseLease(ctx, "w1", "inc_old"); err != nil {
			t.Fatal(err)
		}
		leases, err := db.ListLeases(ctx)
		if err != nil || len(leases) != 2 {
			t.Fatalf("ListLeases = %d, %v", len(leases), err)
		}
		w1, w2 := leases[0], leases[1]
		if !w1.Draining || !w1.ExpiresAt.Equal(lease.ExpiresAt) || w1.Capabilities.MaxSandboxes != 4 || w1.Load.Sandboxes != 2 {
			t.Errorf("w1 = %+v, want its lease, capabilities and load, draining", w1)
		}
		if !w2.Draining || w2.Incarnation != "" || w2.ExpiresAt.After(time.Now()) {
			t.Errorf("w2 = %+v, want a draining row with no incarnation and a lease over", w2)
		}
		if err := db.ReleaseLease(ctx, "w1", "inc_1"); err != nil {
			t.Fatal(err)
		}
		if leases, _ := db.ListLeases(ctx); leases[0].ExpiresAt.After(time.Now()) {
			t.Errorf("w1's released lease expires at %v, want now", leases[0].ExpiresAt)
		}

		for _, p := range []cluster.Placement{
			{Kind: cluster.KindSandbox, ID: "sb_1", Worker: "w1", Tenant: "ten_a", CreatedAt: now},
			{Kind: cluster.KindSandbox, ID: "sb_2", Worker: "w2", Tenant: "ten_a", CreatedAt: now},
			{Kind: cluster.KindBrowser, ID: "sb_1", Worker: "w2", Tenant: "ten_b", CreatedAt: now},
			{Kind: cluster.KindSandbox, ID: "sb_1", Worker: "w9", Tenant: "ten_z", CreatedAt: now}, // nothing moves
		} {
			if err := db.PutPlacement(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := db.GetPlacement(ctx, cluster.KindSandbox, "sb_1"); err != nil || p.Worker != "w1" || p.Tenant != "ten_a" {
			t.Errorf("sb_1 = %+v, %v; want w1's, as first recorded", p, err)
		}
		if n, err := db.CountPlacements(ctx, cluster.KindSandbox); err != nil || n["w1"] != 1 || n["w2"] != 1 || len(n) != 2 {
			t.Errorf("CountPlacements = %v, %v", n, err)
		}
		if n, err := db.TenantPlacements(ctx, "ten_a"); err != nil || n[cluster.KindSandbox] != 2 || len(n) != 1 {
			t.Errorf("TenantPlacements(ten_a) = %v, %v", n, err)
		}
		if err := db.DeletePlacement(ctx, cluster.KindSandbox, "sb_1"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetPlacement(ctx, cluster.KindSandbox, "sb_1"); errcode.ReasonOf(err) != "sandbox_not_found" {
			t.Errorf("a deleted placement = %v, want sandbox_not_found", err)
		}
		if _, err := db.GetPlacement(ctx, cluster.KindBrowser, "sb_1"); err != nil {
			t.Errorf("the browser session of the same ID: %v", err)
		}
		// Forgotten while its worker was lost: the placement goes, the
		// delete to do stays until the worker has done it.
		browser := &cluster.Placement{Kind: cluster.KindBrowser, ID: "sb_1", Worker: "w2", Tenant: "ten_a"}
		if err := db.ForgetLost(ctx, browser); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetPlacement(ctx, cluster.KindBrowser, "sb_1"); errcode.ReasonOf(err) != "session_not_found" {
			t.Errorf("a placement forgotten while lost = %v, want session_not_found", err)
		}
		if l, err := db.LostDeletes(ctx); err != nil || len(l) != 1 || l[0].ID != "sb_1" || l[0].Worker != "w2" || l[0].Kind != cluster.KindBrowser {
			t.Errorf("LostDeletes = %+v, %v; want the browser session on w2", l, err)
		}
		if err := db.DoneLostDelete(ctx, cluster.KindBrowser, "sb_1"); err != nil {
			t.Fatal(err)
		}
		if l, err := db.LostDeletes(ctx); err != nil || len(l) != 0 {
			t.Errorf("LostDeletes after it was done = %+v, %v", l, err)
		}
	})
}
