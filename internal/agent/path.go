package agent

import (
	"path"
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
func (a *Agent) cleanPath(p string) (string, error) {
	ws := a.cfg.Workspace
	if ws != WorkspacePrefix && strings.HasPrefix(p, "/") && len(p) <= MaxPathBytes {
		if rest, ok := strings.CutPrefix(path.Clean(p), ws); ok && (rest == "" || rest[0] == '/') {
			p = "." + rest
		}
	}
	return CleanPath(p)
}
