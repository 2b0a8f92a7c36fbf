package jobs

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Workspace files in and out. A job's input may be a file in a sandbox's
// workspace, read when the job is submitted into the blob store (the job
// then holds an immutable snapshot, by SHA-256, like an upload); its
// outputs may be written into a sandbox's workspace when it succeeds. Both
// go through the sandbox's file API (its agent), which resolves every path
// beneath the workspace on descriptors, refuses symbolic links that lead
// out, and writes atomically (a temporary file in the target directory,
// renamed over the target): a failed write leaves nothing. A sleeping
// sandbox (hibernated, paused) is woken, as every file call wakes it.

// countSet counts the non-empty values.
func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

// checkWorkspaceRef says what is wrong with a workspace reference, or ""
// for one that names no sandbox and no path (not a workspace reference).
// dir allows a path ending in "/" (an output directory).
func checkWorkspaceRef(sbx, p string, dir bool) string {
	switch {
	case sbx == "" && p == "":
		if dir {
			return "give sandbox and path"
		}
		return ""
	case sbx == "" || p == "":
		return "give both sandbox and path"
	case !strings.HasPrefix(sbx, "sbx_"):
		return fmt.Sprintf("sandbox %q is not a sandbox ID (sbx_...)", sbx)
	}
	clean, err := agent.CleanPath(p)
	if err != nil {
		return "path: " + errcode.MessageOf(err)
	}
	if clean == "." && !(dir && strings.HasSuffix(p, "/")) {
		return "path names the workspace itself; name a file"
	}
	if strings.HasSuffix(p, "/") && !dir {
		return "path names a directory; name a file"
	}
	return ""
}

// workspaceSandbox checks that who may use sandbox id as a workspace: its
// tenant's (an admin's: any tenant's) and not one Berth runs for itself.
// Any other is a sandbox that does not exist.
func (s *Service) workspaceSandbox(ctx context.Context, who Principal, id string) error {
	sb, err := s.mgr.Get(ctx, id)
	if errcode.Is(err, errcode.NotFound) || (err == nil && (strings.HasPrefix(sb.Pool, sandbox.InternalPool) ||
		sb.Tenant == "" || (!who.Admin && sb.Tenant != who.Tenant))) {
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	}
	return err
}

// readWorkspace stores the input name from a sandbox's workspace.
func (s *Service) readWorkspace(ctx context.Context, who Principal, name string, in apitype.JobInput) (apitype.FileRef, error) {
	clean, _ := agent.CleanPath(in.Path) // checked
	var body io.ReadCloser
	var err error
	if s.hq() {
		body, err = s.cfg.Cluster.ReadWorkspace(ctx, who, in.Sandbox, clean)
	} else if err = s.workspaceSandbox(ctx, who, in.Sandbox); err == nil {
		var c *agent.Client
		if c, err = s.mgr.Agent(ctx, in.Sandbox); err == nil {
			body, err = c.ReadFile(ctx, clean)
		}
	}
	if errcode.Has(err, errcode.SandboxNotFound) {
		return apitype.FileRef{}, err
	}
	if err != nil {
		return apitype.FileRef{}, prefixed(err, "input %s (sandbox %s, %s)", name, in.Sandbox, in.Path)
	}
	defer body.Close()
	ref, err := s.blobs.Put(ctx, body, MaxInputBytes, name)
	if err == nil {
		err = s.store.AddBlobOwner(ctx, who.Tenant, ref.SHA256)
	}
	if err != nil {
		return apitype.FileRef{}, prefixed(err, "input %s (sandbox %s, %s)", name, in.Sandbox, in.Path)
	}
	ref.Workspace = &apitype.WorkspaceRef{Sandbox: in.Sandbox, Path: clean}
	return ref, nil
}

// prefixed returns err with its message prefixed, its code and reason
// kept.
func prefixed(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...) + ": " + errcode.MessageOf(err)
	return &errcode.Error{Code: errcode.CodeOf(err), Reason: errcode.ReasonOf(err), Message: msg, Err: err}
}

// outputPath is where an output named name goes for destination p: into
// the directory p ending in "/", else p itself (one output only).
func outputPath(p, name string, outputs int) (string, error) {
	clean, err := agent.CleanPath(p)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(p, "/") {
		return path.Join(clean, name), nil
	}
	if outputs > 1 {
		return "", errcode.New(errcode.Invalid, "the job made %d outputs; name a directory (ending in /) to write them into", outputs)
	}
	return clean, nil
}

// deliver writes a succeeded job's outputs into its destination
// workspace and returns them with where each went. Writing over an
// existing file replaces it, as the file API's write does; a directory,
// a symbolic link or a path leading out of the workspace is refused and
// nothing is written.
func (s *Service) deliver(ctx context.Context, j *Job, outs []apitype.FileRef) ([]apitype.FileRef, *failure) {
	dest := j.Output
	if dest == nil {
		return outs, nil
	}
	failWith := func(err error, what string) *failure {
		if ctx.Err() != nil {
			return ctxFailure(ctx)
		}
		code, reason := errcode.CodeOf(err), errcode.ReasonOf(err)
		if reason == "" && (code == errcode.Internal || code == errcode.Unavailable) {
			// The agent could not be reached or gave no reason: worth
			// another attempt.
			code, reason = errcode.Unavailable, "workspace_write_failed"
		} else if reason == "" {
			reason = "workspace_write_failed"
		}
		return &failure{JobError: apitype.JobError{Code: string(code), Reason: reason,
			Message:   fmt.Sprintf("writing %s into sandbox %s failed: %s", what, dest.Sandbox, errcode.MessageOf(err)),
			Retryable: code == errcode.Unavailable}, cause: err}
	}
	c, err := s.mgr.Agent(ctx, dest.Sandbox)
	if err != nil {
		return nil, failWith(err, "the outputs")
	}
	out := make([]apitype.FileRef, len(outs))
	for i, o := range outs {
		p, err := outputPath(dest.Path, o.Name, len(outs))
		if err != nil {
			return nil, failWith(err, o.Name)
		}
		f, err := s.blobs.Open(ctx, o.SHA256)
		if err != nil {
			return nil, failWith(err, o.Name)
		}
		err = c.WriteFile(ctx, p, f, 0o644)
		f.Close()
		if err != nil {
			return nil, failWith(err, o.Name+" to "+p)
		}
		o.Workspace = &apitype.WorkspaceRef{Sandbox: dest.Sandbox, Path: p}
		out[i] = o
	}
	return out, nil
}
