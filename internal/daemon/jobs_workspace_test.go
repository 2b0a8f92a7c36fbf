package daemon_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobWorkspaceAndRuntimeLock: jobs read inputs from a sandbox's
// workspace and write outputs into one (through a hibernated sandbox,
// over an existing file, atomically), refuse traversal, links out and
// another tenant's sandbox with nothing written; a request naming another
// version of an action, a bundle pinned to another runtime, and a runtime
// changed under the daemon are refused before anything is queued. One
// daemon; the subtests run in order (the last changes the runtime).
func TestJobWorkspaceAndRuntimeLock(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx := context.Background()
	actions := t.TempDir()
	writeBundle(t, actions, "pinned", func(m map[string]any) { m["runtime_digest"] = "sha256:" + strings.Repeat("0", 64) })
	// The daemon runs a copy of berth in its sandboxes, which the last
	// subtest replaces.
	bin := filepath.Join(testenv.ShortTempDir(t), "berth")
	orig, err := os.ReadFile(testenv.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.ActionsDir = actions; c.AgentBinary = bin })
	_, ka := tenantKey(t, d, "ws-a", auth.ScopeExecution)
	_, kb := tenantKey(t, d, "ws-b", auth.ScopeExecution)
	ca, cb := client.New(d.URL, ka.Secret), client.New(d.URL, kb.Secret)
	sb, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><html><body><h1>Quarterly report from the workspace</h1></body></html>`
	if _, err := ca.WriteFile(ctx, sb.ID, "reports/q3.html", strings.NewReader(page), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteFile(ctx, sb.ID, "exports/final.pdf", strings.NewReader("an older export"), 0); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir() // on the host, outside every workspace
	if cmd, err := ca.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "ln -s /etc/passwd reports/leak.html && " +
		"ln -s " + outside + " escape && ln -s " + outside + "/evil.pdf exports/evil.pdf"}); err != nil || cmd.ExitCode == nil || *cmd.ExitCode != 0 {
		t.Fatalf("making links: %+v, %v", cmd, err)
	}
	workspaceFile := func(p string) []byte {
		t.Helper()
		rc, err := ca.ReadFile(ctx, sb.ID, p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	exportNames := func() []string {
		t.Helper()
		l, err := ca.ListFiles(ctx, sb.ID, "exports", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range l.Entries {
			names = append(names, e.Name)
		}
		slices.Sort(names)
		return names
	}
	jobCount := func() int {
		t.Helper()
		n := 0
		for _, c := range []*client.Client{ca, cb} {
			list, err := c.Jobs(ctx, client.JobFilter{})
			if err != nil {
				t.Fatal(err)
			}
			n += len(list)
		}
		return n
	}
	input := map[string]apitype.JobInput{"q3.html": client.WorkspaceInput(sb.ID, "reports/q3.html")}

	t.Run("in and out", func(t *testing.T) {
		// A hibernated sandbox is woken to read the input.
		if _, err := ca.HibernateSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		j := runJob(t, ca, apitype.CreateJobRequest{Action: "html-pdf", Inputs: input,
			Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "exports/"}})
		if j.State != apitype.JobSucceeded || len(j.Outputs) != 1 {
			t.Fatalf("job: %s %+v", j.State, j.Error)
		}
		sum := sha256.Sum256([]byte(page))
		if in := j.Inputs[0]; in.SHA256 != hex.EncodeToString(sum[:]) || in.Size != int64(len(page)) ||
			in.Workspace == nil || in.Workspace.Path != "reports/q3.html" {
			t.Errorf("input record %+v, want the workspace file's name, size, sha256 and path", in)
		}
		o := j.Outputs[0]
		if o.Workspace == nil || o.Workspace.Sandbox != sb.ID || o.Workspace.Path != "exports/"+o.Name {
			t.Fatalf("output record %+v, want it written to exports/%s", o, o.Name)
		}
		b := workspaceFile(o.Workspace.Path)
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != o.SHA256 || int64(len(b)) != o.Size {
			t.Errorf("the workspace's %s (%d bytes) differs from the job's record %+v", o.Workspace.Path, len(b), o)
		}
		p := filepath.Join(t.TempDir(), "out.pdf")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if txt := pdfText(t, p); !strings.Contains(txt, "Quarterly report") {
			t.Errorf("the written PDF reads %q", txt)
		}
		// A file path: an existing file there is replaced, whole.
		j = runJob(t, ca, apitype.CreateJobRequest{Action: "html-pdf", Inputs: input,
			Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "exports/final.pdf"}})
		if j.State != apitype.JobSucceeded || j.Outputs[0].Workspace.Path != "exports/final.pdf" {
			t.Fatalf("job: %s %+v %+v", j.State, j.Error, j.Outputs)
		}
		if b := workspaceFile("exports/final.pdf"); !strings.HasPrefix(string(b), "%PDF-") || int64(len(b)) != j.Outputs[0].Size {
			t.Errorf("exports/final.pdf is %d bytes starting %q, want the job's PDF", len(b), b[:min(8, len(b))])
		}
		// The convert route takes the same request and still answers the file.
		rc, id, err := ca.Convert(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: input,
			Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "exports/converted.pdf"}})
		if err != nil {
			t.Fatal(err)
		}
		answered, _ := io.ReadAll(rc)
		rc.Close()
		if b := workspaceFile("exports/converted.pdf"); string(b) != string(answered) || !strings.HasPrefix(string(b), "%PDF-") {
			t.Errorf("convert (job %s) answered %d bytes and wrote %d, want the same PDF", id, len(answered), len(b))
		}
	})

	before := exportNames()
	t.Run("traversal and links refused", func(t *testing.T) {
		n := jobCount()
		for _, tc := range []struct {
			name   string
			in     apitype.JobInput
			out    *apitype.WorkspaceRef
			reason string
		}{
			{"input ../", client.WorkspaceInput(sb.ID, "../../etc/passwd"), nil, "invalid_fields"},
			{"input absolute", client.WorkspaceInput(sb.ID, "/etc/passwd"), nil, "invalid_fields"},
			{"input link out", client.WorkspaceInput(sb.ID, "reports/leak.html"), nil, "path_escapes_workspace"},
			{"input under a link out", client.WorkspaceInput(sb.ID, "escape/x.html"), nil, "path_escapes_workspace"},
			{"output ../", input["q3.html"], &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "../x/"}, "invalid_fields"},
		} {
			_, err := ca.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
				Inputs: map[string]apitype.JobInput{"q3.html": tc.in}, Output: tc.out})
			got := errcode.ReasonOf(err)
			var e *errcode.Error
			if tc.reason == "invalid_fields" && got == "" && errors.As(err, &e) && e.Code == errcode.Invalid &&
				(strings.Contains(fmt.Sprint(e.Problems), "escapes the workspace") || strings.Contains(fmt.Sprint(e.Problems), "outside")) {
				got = tc.reason // refused field by field, naming the escape
			}
			if got != tc.reason {
				t.Errorf("%s: %v (reason %q), want refused with %s", tc.name, err, got, tc.reason)
			}
		}
		if m := jobCount(); m != n {
			t.Errorf("refused requests left %d jobs, want %d", m, n)
		}
		// A destination through a link out is found when written: the job
		// fails and nothing is written anywhere.
		for _, dest := range []string{"escape/", "exports/evil.pdf"} {
			j := runJob(t, ca, apitype.CreateJobRequest{Action: "html-pdf", Inputs: input,
				Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: dest}})
			if j.State != apitype.JobFailed || j.Error == nil || j.Error.Reason != "path_escapes_workspace" || j.Error.Retryable {
				t.Errorf("output to %s: %s %+v, want failed with path_escapes_workspace", dest, j.State, j.Error)
			}
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("the directory outside the workspace got %v", ents)
		}
		if after := exportNames(); !slices.Equal(after, before) {
			t.Errorf("exports/ holds %v after refused writes, want %v (no temporary or partial file)", after, before)
		}
	})

	t.Run("another tenant's sandbox", func(t *testing.T) {
		n := jobCount()
		for _, req := range []apitype.CreateJobRequest{
			{Action: "html-pdf", Inputs: input},
			{Action: "html-pdf", Inputs: map[string]apitype.JobInput{"q3.html": inline([]byte(page))},
				Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "exports/"}},
			{Action: "html-pdf", Inputs: map[string]apitype.JobInput{"q3.html": client.WorkspaceInput("sbx_doesnotexist", "a.html")}},
		} {
			if _, err := cb.CreateJob(ctx, req); !errcode.Is(err, errcode.NotFound) || errcode.ReasonOf(err) != "sandbox_not_found" {
				t.Errorf("tenant B naming %+v: %v, want sandbox_not_found", req, err)
			}
		}
		if m := jobCount(); m != n {
			t.Errorf("refused requests left %d jobs, want %d", m, n)
		}
		if after := exportNames(); !slices.Equal(after, before) {
			t.Errorf("exports/ holds %v, want %v", after, before)
		}
	})

	t.Run("versions", func(t *testing.T) {
		cat, err := ca.ActionCatalog(ctx)
		if err != nil || !strings.HasPrefix(cat.RuntimeDigest, "sha256:") || len(cat.RuntimeDigest) != 71 || cat.RuntimeDigestNow != "" {
			t.Fatalf("catalog runtime digest %q (now %q), %v", cat.RuntimeDigest, cat.RuntimeDigestNow, err)
		}
		for _, h := range cat.Actions {
			if h.Name == "html-pdf" && (!h.Available || h.RuntimeDigest != cat.RuntimeDigest || h.Version != "1.0.0") {
				t.Errorf("html-pdf: %+v, want available at 1.0.0 needing runtime %s", h, cat.RuntimeDigest)
			}
		}
		h, err := ca.Action(ctx, "pinned")
		if err != nil || h.Available || h.Reason != jobs.VersionMismatch || !strings.Contains(h.Hint, "roll back one side") ||
			h.RuntimeDigest != "sha256:"+strings.Repeat("0", 64) {
			t.Errorf("pinned bundle: %+v, %v; want VERSION_MISMATCH needing its pinned runtime", h, err)
		}
		n := jobCount()
		for _, req := range []apitype.CreateJobRequest{
			{Action: "html-pdf", Version: "2.0.0", Inputs: input},
			{Action: "pinned", Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(page))}},
		} {
			if _, err := ca.CreateJob(ctx, req); errcode.ReasonOf(err) != jobs.VersionMismatch || !strings.Contains(errcode.MessageOf(err), "roll back one side") {
				t.Errorf("%s@%s: %v, want VERSION_MISMATCH with its hint", req.Action, req.Version, err)
			}
		}
		if m := jobCount(); m != n {
			t.Errorf("refused requests left %d jobs, want %d", m, n)
		}
		// The version it has runs.
		j := runJob(t, ca, apitype.CreateJobRequest{Action: "html-pdf", Version: "1.0.0",
			Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(page))}})
		if j.State != apitype.JobSucceeded || j.ActionVersion != "1.0.0" {
			t.Errorf("html-pdf@1.0.0: %s %+v", j.State, j.Error)
		}
	})

	t.Run("runtime changed under the daemon", func(t *testing.T) {
		// Berth's binary is replaced (as an upgrade in place would): a new
		// file renamed over the one job sandboxes run.
		tmp := bin + ".new"
		if err := os.WriteFile(tmp, append(slices.Clip(orig), "\x00changed"...), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, bin); err != nil {
			t.Fatal(err)
		}
		n := jobCount()
		h, err := ca.Action(ctx, "html-pdf")
		if err != nil || h.Available || h.Reason != jobs.ProfileUnhealthy || !strings.Contains(h.Hint, "digest") {
			t.Errorf("html-pdf after the change: %+v, %v; want PROFILE_UNHEALTHY with a hint on the digest", h, err)
		}
		cat, err := ca.ActionCatalog(ctx)
		if err != nil || cat.RuntimeDigestNow == "" || cat.RuntimeDigestNow == cat.RuntimeDigest {
			t.Errorf("catalog: recorded %q now %q (%v), want the changed digest shown", cat.RuntimeDigest, cat.RuntimeDigestNow, err)
		}
		if _, err := ca.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
			Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(page))}}); errcode.ReasonOf(err) != jobs.ProfileUnhealthy {
			t.Errorf("a job after the change: %v, want PROFILE_UNHEALTHY", err)
		}
		if m := jobCount(); m != n {
			t.Errorf("refused requests left %d jobs, want %d", m, n)
		}
	})
}
