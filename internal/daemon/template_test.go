package daemon_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/testenv"
)

func waitTemplate(t *testing.T, c *client.Client, name string) apitype.Template {
	t.Helper()
	var tpl apitype.Template
	testenv.Eventually(t, 3*time.Minute, "template "+name+" to finish building", func() bool {
		var err error
		tpl, err = c.Template(context.Background(), name)
		return err == nil && tpl.State != apitype.TemplateBuilding
	})
	return tpl
}

func runIn(t *testing.T, c *client.Client, sbID string, req apitype.CreateCommandRequest) apitype.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := c.Run(ctx, sbID, req)
	if err != nil {
		t.Fatalf("Run(%+v): %v", req, err)
	}
	return rec
}

// TestTemplateBuild builds a template with a file copy and commands, and
// starts sandboxes from it: the layer under /opt and the seed at /template
// are there, read-only, with the template's env; an in-use template cannot
// be removed; a failing build leaves no sandbox and says which step failed.
func TestTemplateBuild(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	tpl, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "tools", Env: map[string]string{"TOOL_HOME": "/opt/tool"},
		Steps: []apitype.TemplateStep{
			{Copy: &apitype.CopyStep{Path: "app/config.txt", ContentBase64: "Y29uZmln", Mode: 0o644}}, // "config"
			{Run: "mkdir -p /opt/tool && echo v1 > /opt/tool/version && echo $TOOL_HOME > /opt/tool/home"},
			{Run: "echo seeded > seed.txt"},
		}})
	if err != nil || tpl.State != apitype.TemplateBuilding {
		t.Fatalf("BuildTemplate = %+v, %v", tpl, err)
	}
	tpl = waitTemplate(t, d.Client, "tools")
	if tpl.State != apitype.TemplateReady || !tpl.Seed || tpl.Base != "base" || tpl.SizeBytes == 0 {
		log, _ := d.Client.TemplateLog(ctx, "tools")
		t.Fatalf("built template = %+v; want ready with a seed\nlog:\n%s", tpl, log)
	}
	if log, err := d.Client.TemplateLog(ctx, "tools"); err != nil || !strings.Contains(log, "==> step 2") {
		t.Errorf("build log = %q, %v", log, err)
	}
	if list, _ := d.Client.ListSandboxes(ctx); len(list) != 0 {
		t.Errorf("sandboxes after the build = %v, want the build sandbox gone", list)
	}

	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "tools"})
	if err != nil || sb.Template != "tools" {
		t.Fatalf("CreateSandbox(template tools) = %+v, %v", sb, err)
	}
	rec := runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Command: "cat /opt/tool/version /opt/tool/home /template/seed.txt /template/app/config.txt; echo; echo $TOOL_HOME"})
	if want := "v1\n/opt/tool\nseeded\nconfig\n/opt/tool\n"; rec.Stdout != want {
		t.Errorf("in a sandbox of the template: %q (stderr %q), want %q", rec.Stdout, rec.Stderr, want)
	}
	// Positive control first: the workspace is writable; the template's
	// files are not.
	rec = runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Command: "echo x > /workspace/ok && echo wrote"})
	if rec.Stdout != "wrote\n" {
		t.Fatalf("writing the workspace: %q %q", rec.Stdout, rec.Stderr)
	}
	for _, p := range []string{"/template/seed.txt", "/opt/tool/version", "/opt/new"} {
		rec = runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Command: "echo x > " + p})
		if rec.ExitCode == nil || *rec.ExitCode == 0 {
			t.Errorf("writing %s in a sandbox of the template succeeded", p)
		}
	}
	if err := d.Client.DeleteTemplate(ctx, "tools"); errcode.ReasonOf(err) != "template_in_use" {
		t.Errorf("DeleteTemplate while in use: %v, want template_in_use", err)
	}
	if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.DeleteTemplate(ctx, "tools"); err != nil {
		t.Errorf("DeleteTemplate: %v", err)
	}
	if _, err := d.Client.Template(ctx, "tools"); !errcode.Is(err, errcode.NotFound) {
		t.Errorf("Template after delete: %v, want not_found", err)
	}
	entries, _ := os.ReadDir(filepath.Join(d.DataDir, "templates"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tpl_") {
			t.Errorf("template directory %s left after delete", e.Name())
		}
	}

	// A failing step fails the build, says which, and leaves nothing.
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "broken",
		Steps: []apitype.TemplateStep{{Run: "echo trying"}, {Run: "echo oops >&2; exit 3"}}}); err != nil {
		t.Fatal(err)
	}
	broken := waitTemplate(t, d.Client, "broken")
	if broken.State != apitype.TemplateFailed || !strings.Contains(broken.Reason, "step 2") || !strings.Contains(broken.Reason, "code 3") {
		t.Errorf("failed build = %+v, want failed at step 2 with code 3", broken)
	}
	if _, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "broken"}); errcode.ReasonOf(err) != "template_not_ready" {
		t.Errorf("create from a failed template: %v, want template_not_ready", err)
	}
	if list, _ := d.Client.ListSandboxes(ctx); len(list) != 0 {
		t.Errorf("sandboxes after a failed build = %v, want none", list)
	}

	// Bad requests change nothing.
	for _, req := range []apitype.BuildTemplateRequest{
		{Name: "Bad Name", Steps: []apitype.TemplateStep{{Run: "true"}}},
		{Name: "base", Steps: []apitype.TemplateStep{{Run: "true"}}},
		{Name: "nosteps"},
		{Name: "both", Steps: []apitype.TemplateStep{{Run: "true", Copy: &apitype.CopyStep{Path: "a"}}}},
		{Name: "escape", Steps: []apitype.TemplateStep{{Copy: &apitype.CopyStep{Path: "../x", ContentBase64: ""}}}},
		{Name: "nobase", From: "missing", Steps: []apitype.TemplateStep{{Run: "true"}}},
	} {
		if _, err := d.Client.BuildTemplate(ctx, req); err == nil {
			t.Errorf("BuildTemplate(%+v) succeeded", req)
		}
	}
	list, err := d.Client.Templates(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "base" {
		t.Errorf("Templates = %+v, %v; want base and broken", list, err)
	}
}

// helloSource is a tiny static program for an image without a shell: it
// prints each file named on its command line, or "missing NAME".
const helloSource = `package main

import (
	"fmt"
	"os"
)

func main() {
	for _, p := range os.Args[1:] {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Println("missing", p)
			continue
		}
		fmt.Print(string(b))
	}
}
`

// ociLayout writes an OCI image layout as a tar: layers are maps of path
// to content ("" with a trailing slash in the path is a directory, and
// content "-> TARGET" makes a symbolic link).
func ociLayout(t *testing.T, layers []map[string]string, env []string) []byte {
	t.Helper()
	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return d, len(b)
	}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int    `json:"size"`
	}
	var layerDescs []desc
	var diffIDs []string
	for _, files := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for name, content := range files {
			hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(1700000000, 0)}
			if strings.HasSuffix(name, "/") {
				hdr.Typeflag, hdr.Size = tar.TypeDir, 0
			}
			if target, ok := strings.CutPrefix(content, "-> "); ok {
				hdr.Typeflag, hdr.Size, hdr.Linkname = tar.TypeSymlink, 0, target
			}
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			if hdr.Typeflag == tar.TypeReg {
				tw.Write([]byte(content))
			}
		}
		tw.Close()
		d, n := add(buf.Bytes())
		layerDescs = append(layerDescs, desc{"application/vnd.oci.image.layer.v1.tar", d, n})
		diffIDs = append(diffIDs, d)
	}
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": env}, "rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}})
	cfgDigest, cfgSize := add(cfg)
	manifest, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc{"application/vnd.oci.image.config.v1+json", cfgDigest, cfgSize}, "layers": layerDescs})
	mDigest, mSize := add(manifest)
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mDigest, "size": mSize,
		"annotations": map[string]string{"org.opencontainers.image.ref.name": "latest"}}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	write := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	write("index.json", index)
	for d, b := range blobs {
		write("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), b)
	}
	tw.Close()
	return out.Bytes()
}

// TestTemplateImport imports an OCI image made here (a static program and
// two layers, the second deleting a file of the first) and runs it: the
// root is the image's, not the host's.
func TestTemplateImport(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	testenv.NeedCommand(t, "go")
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloSource), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644)
	build := exec.Command("go", "build", "-o", "hello", ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the image's program: %v\n%s", err, out)
	}
	hello, err := os.ReadFile(filepath.Join(dir, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	archive := ociLayout(t, []map[string]string{
		{"bin/": "", "bin/hello": string(hello), "etc/": "", "etc/motd": "from the image\n", "etc/gone": "deleted later\n"},
		{"etc/.wh.gone": ""},
	}, []string{"PATH=/bin", "IMAGE_VAR=set"})

	tpl, err := d.Client.ImportTemplate(ctx, "tiny", "", bytes.NewReader(archive))
	if err != nil || tpl.State != apitype.TemplateReady || tpl.Source != apitype.TemplateImport || tpl.Env["IMAGE_VAR"] != "set" {
		t.Fatalf("ImportTemplate = %+v, %v", tpl, err)
	}
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	rec := runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Argv: []string{"/bin/hello", "/etc/motd", "/etc/gone", "/usr/bin/env"}})
	if want := "from the image\nmissing /etc/gone\nmissing /usr/bin/env\n"; rec.Stdout != want {
		t.Errorf("in the imported image: %q (stderr %q, status %s), want %q", rec.Stdout, rec.Stderr, rec.Status, want)
	}

	// A corrupt archive and a taken name fail, and leave nothing behind.
	if _, err := d.Client.ImportTemplate(ctx, "corrupt", "", bytes.NewReader(archive[:len(archive)/2])); err == nil {
		t.Error("importing a truncated archive succeeded")
	}
	if _, err := d.Client.ImportTemplate(ctx, "tiny", "", bytes.NewReader(archive)); errcode.ReasonOf(err) != "template_exists" {
		t.Errorf("importing over an existing name: %v, want template_exists", err)
	}
	list, _ := d.Client.Templates(ctx)
	if len(list) != 2 {
		t.Errorf("templates = %+v, want base and tiny", list)
	}
	entries, _ := os.ReadDir(filepath.Join(d.DataDir, "templates"))
	tpls := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tpl_") || strings.HasPrefix(e.Name(), "import-") {
			tpls++
		}
	}
	if tpls != 1 {
		t.Errorf("template directory holds %d template or spool entries, want 1: %v", tpls, entries)
	}
}

// TestCreateWithUnknownTemplate: a template that does not exist is
// not_found, and nothing is created.
func TestCreateWithUnknownTemplate(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.DefaultRuntime = "process" })
	_, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: "process", Template: "nope"})
	if !errcode.Is(err, errcode.NotFound) {
		t.Errorf("create with an unknown template: %v, want not_found", err)
	}
	if list, _ := d.Client.ListSandboxes(context.Background()); len(list) != 0 {
		t.Errorf("sandboxes = %v, want none", list)
	}
}

// TestTemplatePool keeps warm pools of base and of a built template: the
// build does not take a base pool member (its root would be read-only),
// and a claim from the template's pool keeps the template's env.
func TestTemplatePool(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.WarmPools = []sandbox.PoolSpec{{Template: "base", Size: 1}, {Template: "pooled", Size: 1}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testenv.Eventually(t, 60*time.Second, "the base pool to fill", func() bool {
		sys, err := d.Client.System(ctx)
		return err == nil && sys.Counts.Pooled == 1
	})
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "pooled", Env: map[string]string{"TPL_VAR": "tpl"},
		Steps: []apitype.TemplateStep{{Run: "mkdir -p /opt/x && echo layer > /opt/x/f"}}}); err != nil {
		t.Fatal(err)
	}
	if tpl := waitTemplate(t, d.Client, "pooled"); tpl.State != apitype.TemplateReady {
		log, _ := d.Client.TemplateLog(ctx, "pooled")
		t.Fatalf("build with a base pool = %+v\n%s", tpl, log)
	}
	testenv.Eventually(t, 60*time.Second, "both pools to fill", func() bool {
		sys, err := d.Client.System(ctx)
		return err == nil && sys.Counts.Pooled == 2
	})
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "pooled", Env: map[string]string{"OWN": "own"}})
	if err != nil {
		t.Fatal(err)
	}
	if sys, _ := d.Client.System(ctx); sys.Counts.Sandboxes != 1 {
		t.Errorf("after the claim: %+v", sys.Counts)
	}
	rec := runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Command: "echo $TPL_VAR $OWN; cat /opt/x/f"})
	if rec.Stdout != "tpl own\nlayer\n" {
		t.Errorf("in a sandbox claimed from the template's pool: %q %q", rec.Stdout, rec.Stderr)
	}
}

// TestTemplateTenancy: a tenant's template is its own (another tenant
// neither sees nor uses it, and may own one of the same name); a shared
// one, built with the admin key, every tenant starts from but only the
// operator removes; by name a tenant's own comes first.
func TestTemplateTenancy(t *testing.T) {
	testenv.OneIsolatedPass(t)
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, ka := tenantKey(t, d, "acme", "execution")
	_, kb := tenantKey(t, d, "globex", "execution")
	ca, cb := client.New(d.URL, ka.Secret), client.New(d.URL, kb.Secret)
	build := func(c *client.Client, name, marker string) {
		t.Helper()
		if _, err := c.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: name,
			Steps: []apitype.TemplateStep{{Run: "mkdir -p /opt/m && echo " + marker + " > /opt/m/who"}}}); err != nil {
			t.Fatalf("BuildTemplate(%s, %s): %v", name, marker, err)
		}
		if tpl := waitTemplate(t, c, name); tpl.State != apitype.TemplateReady {
			t.Fatalf("template %s (%s) = %+v, want ready", name, marker, tpl)
		}
	}
	who := func(c *client.Client, tpl string) string {
		t.Helper()
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: tpl})
		if err != nil {
			t.Fatalf("CreateSandbox(template %s): %v", tpl, err)
		}
		return strings.TrimSpace(runIn(t, c, sb.ID, apitype.CreateCommandRequest{Command: "cat /opt/m/who"}).Stdout)
	}
	build(ca, "web", "acme")
	build(d.Client, "shared", "operator")

	// Globex neither sees nor starts from acme's.
	if _, err := cb.Template(ctx, "web"); !client.IsReason(err, "template_not_found") {
		t.Errorf("globex's Template(web) = %v, want template_not_found", err)
	}
	if _, err := cb.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "web"}); !client.IsReason(err, "template_not_found") {
		t.Errorf("globex's sandbox from acme's web = %v, want template_not_found", err)
	}
	if err := cb.DeleteTemplate(ctx, "web"); !client.IsReason(err, "template_not_found") {
		t.Errorf("globex's DeleteTemplate(web) = %v, want template_not_found", err)
	}
	names := func(c *client.Client) string {
		list, err := c.Templates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tpl := range list {
			out = append(out, tpl.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(cb); got != "base,shared" {
		t.Errorf("globex's templates = %s, want base,shared", got)
	}
	if got := names(ca); got != "base,shared,web" {
		t.Errorf("acme's templates = %s, want base,shared,web", got)
	}
	// Each tenant's own web; the shared one for both.
	build(cb, "web", "globex")
	if a, b := who(ca, "web"), who(cb, "web"); a != "acme" || b != "globex" {
		t.Errorf("web for acme, globex = %s, %s; want each its own", a, b)
	}
	if a, b := who(ca, "shared"), who(cb, "shared"); a != "operator" || b != "operator" {
		t.Errorf("shared for acme, globex = %s, %s; want the operator's", a, b)
	}
	// A tenant's own comes first by name; only the operator removes a
	// shared one.
	build(ca, "shared", "acme-own")
	if got := who(ca, "shared"); got != "acme-own" {
		t.Errorf("acme's shared = %s, want its own first", got)
	}
	if err := cb.DeleteTemplate(ctx, "shared"); !client.IsCode(err, errcode.PermissionDenied) {
		t.Errorf("globex's DeleteTemplate(shared) = %v, want permission_denied", err)
	}
	if _, err := cb.Template(ctx, "shared"); err != nil {
		t.Errorf("the shared template after globex's attempt: %v", err)
	}
}
