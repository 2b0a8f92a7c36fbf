package agent

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/errcode"
)

// Path limits. They match Linux's PATH_MAX and NAME_MAX so that a path the
// API accepts is one the kernel can resolve.
const (
	MaxPathBytes      = 4096
	MaxComponentBytes = 255
)

// WorkspacePrefix is where the workspace appears inside isolated sandboxes.
// Absolute API paths under it are taken relative to the workspace, so a
// path printed by a command inside the sandbox can be passed back as is.
const WorkspacePrefix = "/workspace"

// Reasons for rejected paths.
const (
	ReasonPathEscapes  = "path_escapes_workspace"
	ReasonPathInvalid  = "path_invalid"
	ReasonPathTooLong  = "path_too_long"
	ReasonNotRegular   = "not_regular_file"
	ReasonNotDirectory = "not_directory"
	ReasonIsDirectory  = "is_directory"
	ReasonIsSymlink    = "path_is_symlink"
	ReasonFileTooLarge = "file_too_large"
	ReasonExists       = "file_exists"
	ReasonNotEmpty     = "directory_not_empty"
	ReasonWorkspaceOp  = "workspace_root"
)

// CleanPath validates a client-supplied workspace path and returns it in
// the relative, slash-separated, lexically clean form the agent resolves
// inside its root ("." is the workspace itself).
//
// It rejects NUL and control characters, invalid UTF-8, over-long paths and
// components, ".." that climbs above the workspace, and absolute paths
// outside WorkspacePrefix. CleanPath is only the first layer: the agent
// resolves every path through an os.Root, which also refuses symlinks that
// lead out.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", errcode.WithReason(errcode.Invalid, ReasonPathInvalid, "path is empty")
	}
	if len(p) > MaxPathBytes {
		return "", errcode.WithReason(errcode.Invalid, ReasonPathTooLong, "path is longer than %d bytes", MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return "", errcode.WithReason(errcode.Invalid, ReasonPathInvalid, "path is not valid UTF-8")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", errcode.WithReason(errcode.Invalid, ReasonPathInvalid, "path contains a control character (%U)", r)
		}
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(path.Clean(p), WorkspacePrefix)
		if !ok || (rest != "" && rest[0] != '/') {
			return "", errcode.WithReason(errcode.Invalid, ReasonPathEscapes,
				"absolute path %q is outside %s; use a path relative to the workspace", p, WorkspacePrefix)
		}
		p = "." + rest
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", errcode.WithReason(errcode.Invalid, ReasonPathEscapes, "path %q escapes the workspace", p)
	}
	for c := range strings.SplitSeq(clean, "/") {
		if len(c) > MaxComponentBytes {
			return "", errcode.WithReason(errcode.Invalid, ReasonPathTooLong, "a path component is longer than %d bytes", MaxComponentBytes)
		}
	}
	return clean, nil
}

// cleanPath is CleanPath that also takes absolute paths under the agent's
// own workspace directory: under the process runtime that is where
// commands run, so the paths they print must work in the file API too.
//
// Where the kernel's confinement of os.Root cannot be relied on (see
// rootConfines), it also resolves symbolic links itself and refuses those
// leading out; follow says whether the final component is resolved too
// (reads) or left to the operation (writes, moves and removes, which act
// on a link itself).
func (a *Agent) cleanPath(p string, follow bool) (string, error) {
	ws := a.cfg.Workspace
	if ws != WorkspacePrefix && strings.HasPrefix(p, "/") && len(p) <= MaxPathBytes {
		if rest, ok := strings.CutPrefix(path.Clean(p), ws); ok && (rest == "" || rest[0] == '/') {
			p = "." + rest
		}
	}
	clean, err := CleanPath(p)
	if err != nil || a.rootConfines {
		return clean, err
	}
	return a.resolveBeneath(p, clean, follow)
}

// maxSymlinkHops bounds link resolution, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// resolveBeneath resolves the symbolic links in clean one component at a
// time, inside the workspace: an absolute link, or ".." above the
// workspace, is an escape. The result has no links but maybe its last
// component (when !follow).
func (a *Agent) resolveBeneath(raw, clean string, follow bool) (string, error) {
	escape := errcode.WithReason(errcode.Invalid, ReasonPathEscapes, "path %q resolves outside the workspace", raw)
	var done []string
	todo := strings.Split(clean, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".", "":
			continue
		case "..":
			if len(done) == 0 {
				return "", escape
			}
			done = done[:len(done)-1]
			continue
		}
		cand := path.Join(append(done, c)...)
		if len(todo) == 0 && !follow {
			done = append(done, c)
			break
		}
		fi, err := a.root.Lstat(cand)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c) // missing (to be made) or not a link
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", errcode.WithReason(errcode.Invalid, ReasonIsSymlink, "path %q has too many levels of symbolic links", raw)
		}
		target, err := a.root.Readlink(cand)
		if err != nil {
			return "", fileError(err, raw)
		}
		if strings.HasPrefix(target, "/") {
			return "", escape
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// rootConfines checks, once, that os.Root really refuses a link leading
// out of its directory. On Linux the kernel does that (openat2 with
// RESOLVE_BENEATH); a user-space kernel such as gVisor's may not, and the
// agent then resolves links itself (resolveBeneath).
func rootConfines(stateDir string) bool {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return false
	}
	dir, err := os.MkdirTemp(stateDir, ".roottest-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	if err := os.Symlink("/", filepath.Join(dir, "out")); err != nil {
		return false
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	_, err = r.Stat("out/proc")
	return err != nil
}
