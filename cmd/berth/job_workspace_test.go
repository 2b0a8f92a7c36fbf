package main_test

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobWorkspaceCommands: berth job run ACTION@VERSION reads an input
// from a sandbox's workspace and writes the output into it; another
// version is refused; berth actions shows the runtime digest.
func TestJobWorkspaceCommands(t *testing.T) {
	if testenv.Runtime() != "process" {
		t.Skip("job commands run in the process-runtime pass of make test (jobs always use container sandboxes)")
	}
	testenv.NeedRuntime(t, "container")
	testenv.NeedChromium(t)
	t.Parallel()
	ctx := context.Background()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.WriteFile(ctx, sb.ID, "reports/q3.html", strings.NewReader("<h1>Q3 from the workspace</h1>"), 0); err != nil {
		t.Fatal(err)
	}
	if r := c.ok("actions"); !regexp.MustCompile(`(?m)^html-pdf\s+1\.0\.0\s+browser\s+available\s+sha256:[0-9a-f]{12}\s`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^job runtime sha256:[0-9a-f]{64} `).MatchString(r.stdout) {
		t.Errorf("berth actions printed:\n%s\nwant each action's runtime digest and the runtime's", r.stdout)
	}
	c.fails(1, "VERSION_MISMATCH", "job", "run", "html-pdf@9.9.9", "--in-sandbox", sb.ID+":reports/q3.html")
	r := c.ok("job", "run", "html-pdf@1.0.0", "--in-sandbox", sb.ID+":reports/q3.html", "--out-sandbox", sb.ID+":exports/")
	if !strings.Contains(r.stderr, "wrote "+sb.ID+":exports/") {
		t.Errorf("job run printed:\n%s\nwant the workspace file it wrote", r.stderr)
	}
	l, err := d.Client.ListFiles(ctx, sb.ID, "exports", "", 10)
	if err != nil || len(l.Entries) != 1 || !strings.HasSuffix(l.Entries[0].Name, ".pdf") {
		t.Fatalf("exports/: %+v, %v; want one PDF", l.Entries, err)
	}
	rc, err := d.Client.ReadFile(ctx, sb.ID, l.Entries[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); !strings.HasPrefix(string(b), "%PDF-") {
		t.Errorf("%s is not a PDF", l.Entries[0].Path)
	}
}
