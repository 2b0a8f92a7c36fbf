package tenant_test

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/tenant"
)

func TestLimitsCheck(t *testing.T) {
	t.Parallel()
	l := tenant.Limits{MaxSandboxes: 3, MaxRunningSandboxes: 2, MaxMemoryMB: 2048, MaxCPUs: 2, MaxDiskMB: 4096, MaxBrowserSessions: 1}
	use := tenant.Usage{Sandboxes: 2, RunningSandboxes: 1, MemoryMB: 1024, CPUs: 1, DiskMB: 2048, BrowserSessions: 0}
	tests := []struct {
		name   string
		limits tenant.Limits
		use    tenant.Usage
		more   tenant.Usage
		want   string // the quota named, "" for none
	}{
		{"within every limit", l, use, tenant.Usage{Sandboxes: 1, RunningSandboxes: 1, MemoryMB: 1024, CPUs: 1, DiskMB: 2048}, ""},
		{"sandboxes", l, use, tenant.Usage{Sandboxes: 2}, "max_sandboxes is 3 and 2 is in use"},
		{"running", l, use, tenant.Usage{RunningSandboxes: 2}, "max_running_sandboxes"},
		{"memory", l, use, tenant.Usage{MemoryMB: 1025}, "max_memory_mb is 2048 and 1024 is in use"},
		{"cpus", l, use, tenant.Usage{CPUs: 1.5}, "max_cpus is 2 and 1 is in use"},
		{"disk", l, use, tenant.Usage{DiskMB: 2049}, "max_disk_mb"},
		{"browser sessions", l, use, tenant.Usage{BrowserSessions: 2}, "max_browser_sessions"},
		{"no limits", tenant.Limits{}, tenant.Usage{Sandboxes: 1000, MemoryMB: 1 << 30}, tenant.Usage{Sandboxes: 1, MemoryMB: 1}, ""},
		// A limit lowered under what is in use refuses growth, not what
		// adds nothing to it (a wake that needs no more memory).
		{"over, adding nothing", tenant.Limits{MaxMemoryMB: 512}, tenant.Usage{MemoryMB: 1024}, tenant.Usage{RunningSandboxes: 1}, ""},
		{"over, adding more", tenant.Limits{MaxMemoryMB: 512}, tenant.Usage{MemoryMB: 1024}, tenant.Usage{MemoryMB: 1}, "max_memory_mb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.limits.Check(tt.use, tt.more)
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check = %v, want nil", err)
				}
				return
			}
			if !errcode.Has(err, errcode.QuotaExceeded) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check = %v, want quota_exceeded naming %q", err, tt.want)
			}
		})
	}
}

func TestLimitsValid(t *testing.T) {
	t.Parallel()
	if p := (tenant.Limits{MaxSandboxes: 1, Jobs: 2}).Valid(); len(p) != 0 {
		t.Errorf("Valid(positive limits) = %v, want none", p)
	}
	p := (tenant.Limits{MaxSandboxes: -1, MaxCPUs: -0.5, Jobs: -1}).Valid()
	for _, f := range []string{"max_sandboxes", "max_cpus", "jobs"} {
		if p[f] == "" {
			t.Errorf("Valid(negative %s) has no problem for it: %v", f, p)
		}
	}
	if len(p) != 3 {
		t.Errorf("Valid = %v, want exactly the three negative fields", p)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"acme", "a", "acme-2", strings.Repeat("a", 63)} {
		if err := tenant.ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Acme", "-acme", "ac me", "ten_x", strings.Repeat("a", 64)} {
		if err := tenant.ValidName(bad); !errcode.Is(err, errcode.Invalid) {
			t.Errorf("ValidName(%q) = %v, want invalid", bad, err)
		}
	}
}
