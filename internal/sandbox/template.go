package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/image"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Templates. A sandbox's root is an overlay: its own writable upper layer
// over read-only layers that come from its template.
//
//   - base (built in): this machine's system directories, read-only, and a
//     small /etc (see hostTemplate).
//   - import: an OCI image layout or docker save tarball unpacked into one
//     directory (whiteouts applied, owned by root); the root is the image's
//     alone, without the host's system.
//   - build: steps run in a sandbox of another template; what they wrote
//     outside /workspace is frozen into a layer on top of that template's,
//     what they left in /workspace into the seed, mounted read-only at
//     /template.
//
// Templates live in <data>/templates/<id>/ (rootfs/, seed/, build.log) and
// are never changed once ready; one in use by a sandbox cannot be removed.

// Template is a template's durable record.
type Template struct {
	ID, Name, State, Reason, Source string
	// Tenant is the ID of the tenant whose own template it is; "" for a
	// shared one (the operator's: every tenant may start from it).
	Tenant               string
	Base                 string // build: the base template's ID ("" for base)
	Config               TemplateConfig
	SizeBytes            int64
	CreatedAt, UpdatedAt time.Time
}

// TemplateConfig is what a template carries besides files.
type TemplateConfig struct {
	Env  map[string]string `json:"env,omitempty"`
	Seed bool              `json:"seed,omitempty"`
	// Steps are a build's steps, kept to show how it was made.
	Steps []apitype.TemplateStep `json:"steps,omitempty"`
	// Network is the build sandbox's network mode (egress lets steps
	// fetch); sandboxes of the template do not inherit it.
	Network string `json:"network,omitempty"`
}

// TemplateStore is the persistence of templates.
type TemplateStore interface {
	CreateTemplate(ctx context.Context, t *Template) error
	UpdateTemplate(ctx context.Context, t *Template) error
	GetTemplate(ctx context.Context, nameOrID string) (*Template, error)
	// TemplateFor finds a template as tenant sees it (AnyTenant: all).
	TemplateFor(ctx context.Context, tenant, nameOrID string) (*Template, error)
	ListTemplates(ctx context.Context) ([]*Template, error)
	DeleteTemplate(ctx context.Context, id string) error
}

// RootSpec is what a sandbox's root is made of, handed to the runtime.
type RootSpec struct {
	// Layers are read-only directories stacked over the base, top first.
	Layers []string
	// Image is set when the last layer is a whole root (an imported
	// image) and the host's system is not mounted.
	Image bool
	// Seed, when set, is mounted read-only at /template.
	Seed string
	// Writable makes the root writable, with /opt (and /usr/local on an
	// image) owned by the sandbox user: a template build.
	Writable bool
}

// MountPoints returns the directories of a sandbox's root that the
// isolated runtimes mount over (see package runtimes) or that Berth writes into (/etc, /.berth
// for the agent binary's mount point). In every root and every layer of
// one, each must be a real directory or absent (then Berth makes it): a
// runtime mounts procfs at a /proc that is a link wherever the link points.
func MountPoints() []string {
	return []string{"proc", "sys", "dev", "tmp", "run", "workspace", "template", "etc", ".berth"}
}

// checkLayer checks the mount points of a template's layer at dir.
func checkLayer(dir string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return image.CheckMountPoints(r, MountPoints(), "the built layer's")
}

var templateNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Template build bounds.
const (
	maxTemplateSteps   = 64
	defaultStepTimeout = 30 * time.Minute
)

func (m *Manager) templateDir(id string) string { return filepath.Join(m.cfg.DataDir, "templates", id) }

// TemplateInfo renders a template for the API.
func TemplateInfo(t *Template) apitype.Template {
	out := apitype.Template{ID: t.ID, Name: t.Name, State: t.State, Reason: t.Reason, Source: t.Source,
		Env: t.Config.Env, Seed: t.Config.Seed, SizeBytes: t.SizeBytes, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if t.Source == apitype.TemplateBuilt {
		out.Base = BaseTemplate
		if t.Base != "" {
			out.Base = t.Base
		}
	}
	return out
}

// baseTemplate is the record of the built-in template.
var baseTemplate = &Template{ID: "", Name: BaseTemplate, State: apitype.TemplateReady, Source: apitype.TemplateBuiltin}

// AnyTenant, as the tenant of a template lookup or list, sees every
// tenant's templates (an admin key).
const AnyTenant = "*"

// Templates lists the templates tenant sees (its own and the shared ones;
// AnyTenant: all), the built-in base first.
func (m *Manager) Templates(ctx context.Context, tenant string) ([]*Template, error) {
	list, err := m.store.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	out := []*Template{baseTemplate}
	for _, t := range list {
		if tenant == AnyTenant || t.Tenant == "" || t.Tenant == tenant {
			out = append(out, t)
		}
	}
	return out, nil
}

// Template returns a template by name or ID, as tenant sees it.
func (m *Manager) Template(ctx context.Context, tenant, name string) (*Template, error) {
	if name == "" || name == BaseTemplate {
		return baseTemplate, nil
	}
	return m.store.TemplateFor(ctx, tenant, name)
}

// readyTemplate returns a template sandboxes of tenant can start from.
func (m *Manager) readyTemplate(ctx context.Context, tenant, name string) (*Template, error) {
	t, err := m.Template(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	if t.State != apitype.TemplateReady {
		return nil, errcode.TemplateNotReady.New("template %q is %s", t.Name, t.State)
	}
	return t, nil
}

// rootSpec resolves the layers of template id, top first.
func (m *Manager) rootSpec(ctx context.Context, id string) (RootSpec, error) {
	var rs RootSpec
	for depth := 0; id != ""; depth++ {
		if depth > 16 {
			return rs, errcode.New(errcode.Internal, "template chain too deep")
		}
		t, err := m.store.GetTemplate(ctx, id)
		if err != nil {
			return rs, err
		}
		dir := m.templateDir(t.ID)
		if rs.Seed == "" && t.Config.Seed {
			rs.Seed = filepath.Join(dir, "seed")
		}
		rs.Layers = append(rs.Layers, filepath.Join(dir, "rootfs"))
		if t.Source == apitype.TemplateImport {
			rs.Image = true
			break
		}
		id = t.Base
	}
	return rs, nil
}

// DeleteTemplate removes a template no sandbox or other template uses.
// A tenant removes only its own; shared ones are the operator's.
func (m *Manager) DeleteTemplate(ctx context.Context, tenant, name string) error {
	if name == BaseTemplate {
		return errcode.TemplateBuiltin.New("the base template is built in")
	}
	t, err := m.store.TemplateFor(ctx, tenant, name)
	if err != nil {
		return err
	}
	if tenant != AnyTenant && t.Tenant != tenant {
		return errcode.New(errcode.PermissionDenied, "template %q is shared: only the operator (an admin key) removes it", t.Name)
	}
	if t.State == apitype.TemplateBuilding {
		return errcode.TemplateBuilding.New("template %q is still building", t.Name)
	}
	sbs, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if sb.Template == t.ID {
			return errcode.TemplateInUse.New("sandbox %s uses template %q; delete it first", sb.ID, t.Name)
		}
	}
	all, err := m.store.ListTemplates(ctx)
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.Base == t.ID {
			return errcode.TemplateInUse.New("template %q is built on %q", o.Name, t.Name)
		}
	}
	for _, p := range m.cfg.Pools {
		if p.Template == t.Name {
			return errcode.TemplateInUse.New("a warm pool keeps sandboxes of %q", t.Name)
		}
	}
	if err := m.store.DeleteTemplate(ctx, t.ID); err != nil {
		return err
	}
	return os.RemoveAll(m.templateDir(t.ID))
}

// CheckNewTemplateName reports whether name can name a new template: valid
// and not taken. An import checks it before it takes in the archive.
func (m *Manager) CheckNewTemplateName(ctx context.Context, tenant, name string) error {
	p := map[string]string{}
	validTemplateName(name, p)
	if len(p) > 0 {
		return errcode.InvalidFields(p)
	}
	if t, err := m.store.TemplateFor(ctx, tenant, name); err == nil && t.Tenant == tenant {
		return errcode.TemplateExists.New("a template named %q exists; remove it first", name)
	} else if !errcode.Is(err, errcode.NotFound) {
		return err
	}
	return nil
}

func validTemplateName(name string, problems map[string]string) {
	if !templateNameRE.MatchString(name) || name == BaseTemplate {
		problems["name"] = "must be 1-63 lower-case letters, digits, '.', '_' or '-', and not base"
	}
}

// newTemplate records a template that is being made.
func (m *Manager) newTemplate(ctx context.Context, tenant, name, source, base string, cfg TemplateConfig) (*Template, error) {
	now := time.Now().UTC()
	t := &Template{ID: ident.New("tpl_"), Tenant: tenant, Name: name, State: apitype.TemplateBuilding, Source: source, Base: base,
		Config: cfg, CreatedAt: now, UpdatedAt: now}
	if err := m.store.CreateTemplate(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// finishTemplate records how making t ended.
func (m *Manager) finishTemplate(ctx context.Context, t *Template, err error) {
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		t.State, t.Reason = apitype.TemplateFailed, err.Error()
		_ = os.RemoveAll(filepath.Join(m.templateDir(t.ID), "rootfs"))
		_ = os.RemoveAll(filepath.Join(m.templateDir(t.ID), "seed"))
	} else {
		t.State, t.Reason = apitype.TemplateReady, ""
		t.SizeBytes = dirSize(m.templateDir(t.ID))
	}
	if uerr := m.store.UpdateTemplate(ctx, t); uerr != nil {
		m.log.ErrorContext(ctx, "recording a template", "template", t.Name, "err", uerr)
	} else if t.State == apitype.TemplateReady {
		m.retryPools() // a pool may have waited for it
	}
}

// BuildTemplate starts building a template of tenant's ("" for a shared
// one) from steps in the background and returns its record (state
// building). Its build sandbox is the tenant's and counts in its quotas.
func (m *Manager) BuildTemplate(ctx context.Context, tenant string, req apitype.BuildTemplateRequest) (*Template, error) {
	p := map[string]string{}
	validTemplateName(req.Name, p)
	ValidateEnv(req.Env, p, "env")
	if len(req.Steps) == 0 || len(req.Steps) > maxTemplateSteps {
		p["steps"] = fmt.Sprintf("give 1 to %d steps", maxTemplateSteps)
	}
	for i, s := range req.Steps {
		field := fmt.Sprintf("steps[%d]", i)
		switch {
		case (s.Run == "") == (s.Copy == nil):
			p[field] = "set exactly one of run and copy"
		case s.Copy != nil:
			if _, err := base64.StdEncoding.DecodeString(s.Copy.ContentBase64); err != nil {
				p[field+".copy.content_base64"] = "must be base64"
			}
			if c := path.Clean(s.Copy.Path); s.Copy.Path == "" || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
				p[field+".copy.path"] = "must be a path inside the workspace"
			}
		case strings.ContainsRune(s.Run, 0):
			p[field+".run"] = "must not contain NUL"
		}
		if s.TimeoutMS < 0 || time.Duration(s.TimeoutMS)*time.Millisecond > m.cfg.MaxTimeout {
			p[field+".timeout_ms"] = "must be between 0 and the maximum command timeout"
		}
	}
	switch req.Network {
	case "", netpolicy.ModeNone, netpolicy.ModeEgress:
	default:
		p["network"] = "must be none or egress"
	}
	if len(p) > 0 {
		return nil, errcode.InvalidFields(p)
	}
	rt, ok := m.runtimes["container"]
	if !ok || rt.Available() != nil {
		return nil, errcode.RuntimeUnavailable.New("template builds run in the container runtime, which is not available here; see berth doctor")
	}
	base, err := m.readyTemplate(ctx, tenant, req.From)
	if err != nil {
		return nil, err
	}
	network := netpolicy.Policy{Mode: cmp.Or(req.Network, netpolicy.ModeNone)}
	if err := m.validNetwork(network, rt); err != nil {
		return nil, err
	}
	cfg := TemplateConfig{Env: maps.Clone(base.Config.Env), Steps: req.Steps, Network: network.Mode}
	if cfg.Env == nil && len(req.Env) > 0 {
		cfg.Env = map[string]string{}
	}
	maps.Copy(cfg.Env, req.Env)
	t, err := m.newTemplate(ctx, tenant, req.Name, apitype.TemplateBuilt, base.ID, cfg)
	if err != nil {
		return nil, err
	}
	m.wg.Go(func() {
		err := m.build(m.bg, t, base)
		m.finishTemplate(m.bg, t, err)
		if err != nil {
			m.log.ErrorContext(m.bg, "template build failed", "template", t.Name, "err", err)
		} else {
			m.log.InfoContext(m.bg, "template built", "template", t.Name, "bytes", t.SizeBytes)
		}
	})
	return t, nil
}

// build runs t's steps in a sandbox of base and freezes the result.
func (m *Manager) build(ctx context.Context, t *Template, base *Template) (err error) {
	dir := m.templateDir(t.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "build.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	sb, _, err := m.Create(ctx, CreateSpec{Tenant: t.Tenant, Runtime: "container", Template: base.ID, Env: t.Config.Env,
		Labels: map[string]string{buildLabel: t.Name}, Idle: &IdlePolicy{}, build: true,
		Network: netpolicy.Policy{Mode: cmp.Or(t.Config.Network, netpolicy.ModeNone)}})
	if err != nil {
		return fmt.Errorf("starting the build sandbox: %w", err)
	}
	defer func() {
		if derr := m.Delete(context.WithoutCancel(ctx), sb.ID); derr != nil && err == nil {
			err = fmt.Errorf("removing the build sandbox: %w", derr)
		}
	}()
	c, err := m.Agent(ctx, sb.ID)
	if err != nil {
		return err
	}
	for i, s := range t.Config.Steps {
		if s.Copy != nil {
			b, _ := base64.StdEncoding.DecodeString(s.Copy.ContentBase64)
			fmt.Fprintf(logf, "==> step %d: copy %s (%d bytes)\n", i+1, s.Copy.Path, len(b))
			if err := c.WriteFile(ctx, s.Copy.Path, bytes.NewReader(b), s.Copy.Mode); err != nil {
				return fmt.Errorf("step %d: copying %s: %w", i+1, s.Copy.Path, err)
			}
			continue
		}
		fmt.Fprintf(logf, "==> step %d: %s\n", i+1, s.Run)
		timeout := defaultStepTimeout
		if s.TimeoutMS > 0 {
			timeout = time.Duration(s.TimeoutMS) * time.Millisecond
		}
		rec, err := m.runStep(ctx, sb.ID, s.Run, timeout)
		if rec != nil {
			logf.WriteString(rec.Stdout)
			logf.WriteString(rec.Stderr)
		}
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.Run, err)
		}
		if rec.Status != apitype.CommandExited || rec.ExitCode == nil || *rec.ExitCode != 0 {
			return fmt.Errorf("step %d (%s) ended %s%s: %s", i+1, s.Run, rec.Status, exitSuffix(rec), lastLine(rec.Stderr, rec.Stdout))
		}
	}
	fmt.Fprintf(logf, "==> freezing\n")
	l := LayoutFor(m.cfg.DataDir, sb.ID)
	if err := freezeTree(l.Workspace, filepath.Join(dir, "seed"), nil); err != nil {
		return fmt.Errorf("freezing the workspace: %w", err)
	}
	t.Config.Seed = !emptyDir(filepath.Join(dir, "seed"))
	if !t.Config.Seed {
		_ = os.RemoveAll(filepath.Join(dir, "seed"))
	}
	// Stop the sandbox: its upper layer stays, whole and quiet.
	if err := m.Hibernate(ctx, sb.ID); err != nil {
		return err
	}
	skip := map[string]bool{"etc/passwd": true, "etc/group": true, "workspace": true, "template": true, "tmp": true}
	layer := filepath.Join(dir, "rootfs")
	if err := freezeTree(l.Upper, layer, skip); err != nil {
		return fmt.Errorf("freezing the root layer: %w", err)
	}
	// What the steps made of the mount points is the template's to keep:
	// its sandboxes would start with the runtime mounting through it.
	if err := checkLayer(layer); err != nil {
		_ = os.RemoveAll(layer)
		return err
	}
	return nil
}

// runStep runs one build command to its end.
func (m *Manager) runStep(ctx context.Context, sandboxID, command string, timeout time.Duration) (*CommandRecord, error) {
	rec, err := m.Exec(ctx, sandboxID, ExecSpec{Command: command, TimeoutMS: timeout.Milliseconds()}, nil)
	if err != nil {
		return nil, err
	}
	for !rec.Done() {
		if rec, err = m.Command(ctx, sandboxID, rec.ID, map[string][]string{"wait_ms": {"30000"}}); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

func exitSuffix(rec *CommandRecord) string {
	switch {
	case rec.ExitCode != nil:
		return fmt.Sprintf(" with code %d", *rec.ExitCode)
	case rec.Signal != "":
		return " by " + rec.Signal
	}
	return ""
}

func lastLine(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s[strings.LastIndexByte(s, '\n')+1:]
		}
	}
	return "no output"
}

func emptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err != nil || len(entries) == 0
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// recoverTemplates marks builds a crash interrupted as failed.
func (m *Manager) recoverTemplates(ctx context.Context) error {
	list, err := m.store.ListTemplates(ctx)
	if err != nil {
		return err
	}
	for _, t := range list {
		if t.State == apitype.TemplateBuilding {
			m.finishTemplate(ctx, t, errors.New("interrupted by a daemon restart"))
		}
	}
	return nil
}
