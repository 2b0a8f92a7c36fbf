package agent

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
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
const ()

// errEscapes is a path that resolves outside the workspace: ".." above it,
// or an absolute symbolic link.
var errEscapes = errors.New("path escapes the workspace")

// errChanged is a path that kept changing while the agent acted on it:
// a name it resolved was replaced before the operation, every retry.
var errChanged = errors.New("path changed during resolution")

// errIsLink is a name that is a symbolic link where the caller resolved
// one that was not (it changed since).
var errIsLink = errors.New("is a symbolic link")

// CleanPath validates a client-supplied workspace path and returns it in
// the relative, slash-separated, lexically clean form the agent resolves
// inside its root ("." is the workspace itself).
//
// It rejects NUL and control characters, invalid UTF-8, over-long paths and
// components, ".." that climbs above the workspace, and absolute paths
// outside WorkspacePrefix. CleanPath is only the first layer: the file
// API resolves every path on descriptors under the workspace's (see
// resolve_linux.go), which also refuses symbolic links that lead out.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", errcode.PathInvalid.New("path is empty")
	}
	if len(p) > MaxPathBytes {
		return "", errcode.PathTooLong.New("path is longer than %d bytes", MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return "", errcode.PathInvalid.New("path is not valid UTF-8")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", errcode.PathInvalid.New("path contains a control character (%U)", r)
		}
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(path.Clean(p), WorkspacePrefix)
		if !ok || (rest != "" && rest[0] != '/') {
			return "", errcode.PathEscapesWorkspace.New("absolute path %q is outside %s; use a path relative to the workspace", p, WorkspacePrefix)
		}
		p = "." + rest
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", errcode.PathEscapesWorkspace.New("path %q escapes the workspace", p)
	}
	for c := range strings.SplitSeq(clean, "/") {
		if len(c) > MaxComponentBytes {
			return "", errcode.PathTooLong.New("a path component is longer than %d bytes", MaxComponentBytes)
		}
	}
	return clean, nil
}

// cleanPath is workspacePath for a command's working directory, which
// the kernel resolves again when the command starts. Where the kernel's
// confinement of os.Root cannot be relied on (see rootConfines), it also
// resolves symbolic links itself and refuses those leading out; follow
// says whether the final component is resolved too.
//
// The file API does not use it: it takes workspacePath and resolves links
// on descriptors (resolve_linux.go), which no swap can race.
func (a *Agent) cleanPath(p string, follow bool) (string, error) {
	clean, err := a.workspacePath(p)
	if err != nil || a.rootConfines {
		return clean, err
	}
	return a.resolveBeneath(p, clean, follow)
}

// workspacePath is CleanPath that also takes absolute paths under the
// agent's own workspace directory: under the process runtime that is
// where commands run, so the paths they print must work in the file API
// too.
func (a *Agent) workspacePath(p string) (string, error) {
	ws := a.cfg.Workspace
	if ws != WorkspacePrefix && strings.HasPrefix(p, "/") && len(p) <= MaxPathBytes {
		if rest, ok := strings.CutPrefix(path.Clean(p), ws); ok && (rest == "" || rest[0] == '/') {
			p = "." + rest
		}
	}
	return CleanPath(p)
}

// maxSymlinkHops bounds link resolution, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// maxRetries bounds how often a file operation starts again because a
// name it resolved changed before it acted on it, or a rename raced the
// kernel's resolution (openat2's EAGAIN).
const maxRetries = 8

// resolveBeneath resolves the symbolic links in clean one component at a
// time, inside the workspace: an absolute link, or ".." above the
// workspace, is an escape. The result has no links but maybe its last
// component (when !follow).
func (a *Agent) resolveBeneath(raw, clean string, follow bool) (string, error) {
	escape := errcode.PathEscapesWorkspace.New("path %q resolves outside the workspace", raw)
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
			return "", errcode.PathIsSymlink.New("path %q has too many levels of symbolic links", raw)
		}
		target, err := a.root.Readlink(cand)
		if errors.Is(err, syscall.EINVAL) {
			done = append(done, c) // no longer a link: swapped since the Lstat
			continue
		}
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
// out of its directory. os.Root walks with openat(O_NOFOLLOW|O_DIRECTORY),
// which Linux fails on a link; gVisor opens the link's target instead
// (google/gvisor#14786), and the agent then resolves links itself
// (resolveBeneath) for the commands' working directories.
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
