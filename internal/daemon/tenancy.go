package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/tenant"
)

// TenantFile records the tenant a data directory is bound to (serve
// --tenant): once written, the directory serves that tenant only.
const TenantFile = "tenant"

// bindTenant returns the tenant admin keys create in: the default tenant,
// or with name set the tenant the data directory is bound to, which it
// makes (and records in TenantFile) on the first such start. A directory
// bound to another tenant refuses to start.
func bindTenant(ctx context.Context, dataDir, name string, db *store.DB) (string, error) {
	path := filepath.Join(dataDir, TenantFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		bound := strings.TrimSpace(string(b))
		if name != bound {
			if name == "" {
				return "", errcode.TenantBound.New("data directory %s is bound to tenant %q; start it with --tenant %s", dataDir, bound, bound)
			}
			return "", errcode.TenantBound.New("data directory %s is bound to tenant %q, not %q; use another data directory", dataDir, bound, name)
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("reading %s: %w", path, err)
	case name == "":
		return tenant.DefaultID, nil
	}
	if err := tenant.ValidName(name); err != nil {
		return "", fmt.Errorf("--tenant: %w", err)
	}
	t, err := db.GetTenant(ctx, name)
	if errcode.Is(err, errcode.NotFound) {
		now := time.Now().UTC()
		t = &tenant.Tenant{ID: ident.New("ten_"), Name: name, CreatedAt: now, UpdatedAt: now}
		err = db.CreateTenant(ctx, t)
	}
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(name+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("recording the bound tenant: %w", err)
	}
	return t.ID, nil
}

// refuseUnisolated is tenant mode's vetting of sandbox creates: only
// isolated runtimes.
func refuseUnisolated(spec *sandbox.CreateSpec, rt sandbox.Runtime) error {
	if !rt.Isolated() {
		return errcode.TenantMode.New("runtime %s is not isolated and tenant mode (--tenant-mode) refuses it; use container or gvisor", rt.Name())
	}
	return nil
}

// sweepIdempotency removes expired idempotency records hourly until ctx
// ends.
func sweepIdempotency(ctx context.Context, db *store.DB, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := db.DeleteExpiredIdempotency(ctx, time.Now()); err != nil && ctx.Err() == nil {
			log.Warn("removing expired idempotency keys", "err", err)
		} else if n > 0 {
			log.Debug("removed expired idempotency keys", "keys", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkIsolated refuses tenant mode over sandboxes made before it on the
// process runtime: their commands would run on the host.
func checkIsolated(ctx context.Context, db *store.DB) error {
	all, err := db.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	var bad []string
	for _, sb := range all {
		if sb.Runtime == "process" {
			bad = append(bad, sb.ID)
		}
	}
	if len(bad) > 0 {
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
		}
		return errcode.TenantMode.New("tenant mode refuses sandboxes on the process runtime, and this data directory has some (%s): "+
			"delete them (start without --tenant-mode) before turning it on", strings.Join(bad, ", "))
	}
	return nil
}
