package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
	"golang.org/x/sys/unix"
)

// The file API tests drive the real daemon, the real agent and the real
// client. API errors are compared in their "code/reason" form (apiErr);
// httpapi maps invalid to 400, not_found to 404, conflict to 409 and
// payload_too_large to 413, and the client maps the status back.

// Expected results, in apiErr form.
const (
	fileOK          = "ok"
	fileEscapes     = "invalid/path_escapes_workspace"
	filePathInvalid = "invalid/path_invalid"
	fileTooLong     = "invalid/path_too_long"
	fileNotRegular  = "invalid/not_regular_file"
	fileNotDir      = "invalid/not_directory"
	fileIsDir       = "invalid/is_directory"
	fileIsSymlink   = "invalid/path_is_symlink"
	fileRootOp      = "invalid/workspace_root"
	fileNotFound    = "not_found/file_not_found"
	fileExists      = "conflict/file_exists"
	fileNotEmpty    = "conflict/directory_not_empty"
)

// apiErr renders err as "code/reason", "ok" for nil, or a description of
// an error that did not come from the API.
func apiErr(err error) string {
	if err == nil {
		return fileOK
	}
	var e *errcode.Error
	if !errors.As(err, &e) {
		return "non-API error: " + err.Error()
	}
	return string(e.Code) + "/" + e.Reason
}

// fileCtx bounds a test's file API calls, so a call that hangs fails the
// test instead of stalling it.
func fileCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// newFileSandbox creates a sandbox and returns it with its workspace on
// the host.
func newFileSandbox(t *testing.T, d *testenv.Daemon) (apitype.Sandbox, string) {
	t.Helper()
	sb := newSandbox(t, d)
	ws := d.HostWorkspace(sb.ID)
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		t.Fatalf("workspace %q of %s: %v, want a directory", ws, sb.ID, err)
	}
	return sb, ws
}

// runScript runs script in the sandbox and fails t unless it exits 0.
func runScript(t *testing.T, d *testenv.Daemon, id, script string) {
	t.Helper()
	c := run(t, d, id, apitype.CreateCommandRequest{Command: "set -e; " + script})
	if c.ExitCode == nil || *c.ExitCode != 0 {
		t.Fatalf("sh(%q) = %s %v: %s, want exit 0", script, c.Status, c.ExitCode, c.Stderr)
	}
}

func putFile(t *testing.T, c *client.Client, id, p string, data []byte, mode uint32) apitype.FileInfo {
	t.Helper()
	fi, err := c.WriteFile(fileCtx(t, time.Minute), id, p, bytes.NewReader(data), mode)
	if err != nil {
		t.Fatalf("WriteFile(%q) = %s, want ok", p, apiErr(err))
	}
	return fi
}

func catFile(ctx context.Context, c *client.Client, id, p string) ([]byte, error) {
	rc, err := c.ReadFile(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// hostWriteFile writes a file on the host, creating its parents.
func hostWriteFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxOwns(t, p)
}

// hostMove moves a file as mv(1) does: renamed, or copied and removed
// when from and to are on different file systems (an isolated sandbox's
// workspace is a file system of its own).
func hostMove(from, to string) error {
	err := os.Rename(from, to)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		return err
	}
	return os.Remove(from)
}

// mountedNodev reports whether dir's file system is mounted nodev.
func mountedNodev(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Flags&unix.ST_NODEV != 0
}

// sandboxOwns gives p, and the directories above it that the test made,
// to the owner of the nearest ancestor not owned by root: the workspace of
// an isolated sandbox belongs to its own uid, and what a test sets up from
// the host must be the sandbox's as if it had made it. Under the process
// runtime everything is root's and nothing changes.
func sandboxOwns(t *testing.T, p string) {
	t.Helper()
	var mine []string
	for dir := p; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 {
			for _, m := range mine {
				if err := os.Lchown(m, int(st.Uid), int(st.Gid)); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		mine = append(mine, dir)
	}
}

// hostFileState describes what is at p on the host: "absent", "dir", "link",
// "other", or a regular file's content.
func hostFileState(p string) string {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case err != nil:
		return "error: " + err.Error()
	case fi.IsDir():
		return "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "link"
	case !fi.Mode().IsRegular():
		return "other"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

// uploadLeftovers lists the upload temporary files under ws.
func uploadLeftovers(ws string) []string {
	var left []string
	_ = filepath.WalkDir(ws, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".berth-upload-") {
			left = append(left, p)
		}
		return nil
	})
	return left
}

// checkNoLeftovers waits until no upload temporary file is left in ws: the
// agent may still be cleaning up when the daemon has already answered.
func checkNoLeftovers(t *testing.T, ws string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := uploadLeftovers(ws)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload temporary files left behind: %q", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chunkedBody hides a reader's length, so the client sends a chunked body with
// no Content-Length.
type chunkedBody struct{ io.Reader }

func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	random := make([]byte, 1<<20)
	rand.Read(random)
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	tests := []struct {
		name     string
		path     string
		wantPath string // clean, workspace-relative
		data     []byte
	}{
		{"text", "hello.txt", "hello.txt", []byte("hello\n")},
		{"empty", "empty", "empty", nil},
		{"NUL bytes", "nul.bin", "nul.bin", []byte("a\x00b\x00\x00\xff\xfe\x00")},
		{"all byte values", "all.bin", "all.bin", allBytes},
		{"1 MiB random", "big/random.bin", "big/random.bin", random},
		{"parents created", "p/q/r/s/t.txt", "p/q/r/s/t.txt", []byte("deep")},
		{"workspace absolute", "/workspace/abs/x.txt", "abs/x.txt", []byte("abs")},
		{"unclean", "./u//v/../w.txt", "u/w.txt", []byte("unclean")},
		{"unicode and spaces", "dir with space/é 日本.txt", "dir with space/é 日本.txt", []byte("名前")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fi := putFile(t, d.Client, sb.ID, tt.path, tt.data, 0)
			if fi.Path != tt.wantPath || fi.Type != "file" || fi.Size != int64(len(tt.data)) || fi.Mode != "-rw-r--r--" {
				t.Errorf("WriteFile(%q) = %+v, want path %q, type file, size %d, mode -rw-r--r--", tt.path, fi, tt.wantPath, len(tt.data))
			}
			ctx := fileCtx(t, time.Minute)
			for _, p := range []string{tt.path, tt.wantPath} {
				got, err := catFile(ctx, d.Client, sb.ID, p)
				if err != nil || !bytes.Equal(got, tt.data) {
					t.Errorf("ReadFile(%q) = %d bytes, %s, want the %d bytes written", p, len(got), apiErr(err), len(tt.data))
				}
			}
			host, err := os.ReadFile(filepath.Join(ws, tt.wantPath))
			if err != nil || !bytes.Equal(host, tt.data) {
				t.Errorf("host os.ReadFile(%q) = %d bytes, %v, want the %d bytes written", tt.wantPath, len(host), err, len(tt.data))
			}
		})
	}
}

func TestFilesOverwrite(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	putFile(t, d.Client, sb.ID, "f.txt", []byte("the first, longer version"), 0o600)
	putFile(t, d.Client, sb.ID, "f.txt", []byte("second"), 0)
	got, err := catFile(fileCtx(t, time.Minute), d.Client, sb.ID, "f.txt")
	if err != nil || string(got) != "second" {
		t.Errorf("ReadFile(f.txt) after overwrite = %q, %s, want %q", got, apiErr(err), "second")
	}
	if fi, err := os.Lstat(filepath.Join(ws, "f.txt")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("host mode of f.txt after overwrite with the default mode = %v, %v, want %v", fi.Mode(), err, fs.FileMode(0o644))
	}
	if left := uploadLeftovers(ws); len(left) != 0 {
		t.Errorf("upload temporary files left behind: %q", left)
	}
}

// TestFilesModeBits covers FILE-17: permission bits are stored as asked,
// setuid, setgid and sticky never.
func TestFilesModeBits(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)

	// Positive control: the workspace's file system keeps setuid and
	// setgid bits when asked to, so their absence below is the agent's
	// doing.
	control := filepath.Join(ws, "control")
	hostWriteFile(t, control, "#!/bin/sh\n")
	if err := os.Chmod(control, 0o755|fs.ModeSetuid|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(control); err != nil || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != fs.ModeSetuid|fs.ModeSetgid {
		t.Fatalf("control: host chmod 06755 then Lstat = %v, %v, want setuid and setgid kept", fi.Mode(), err)
	}

	tests := []struct {
		name string
		mode uint32
		want fs.FileMode
	}{
		{"default", 0, 0o644},
		{"0755 kept", 0o755, 0o755},
		{"0600 kept", 0o600, 0o600},
		{"0777 kept despite umask", 0o777, 0o777},
		{"setuid dropped", 0o4755, 0o755},
		{"setgid dropped", 0o2755, 0o755},
		{"sticky dropped", 0o1777, 0o777},
		{"all special bits dropped", 0o7777, 0o777},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := strings.ReplaceAll(tt.name, " ", "_")
			fi := putFile(t, d.Client, sb.ID, p, []byte("#!/bin/sh\n"), tt.mode)
			if fi.Mode != tt.want.String() {
				t.Errorf("WriteFile(mode %#o).Mode = %s, want %s", tt.mode, fi.Mode, tt.want)
			}
			host, err := os.Lstat(filepath.Join(ws, p))
			if err != nil || host.Mode() != tt.want {
				t.Errorf("host os.Lstat after WriteFile(mode %#o) = %v, %v, want %v", tt.mode, host.Mode(), err, tt.want)
			}
		})
	}
	t.Run("out of range", func(t *testing.T) {
		t.Parallel()
		_, err := d.Client.WriteFile(fileCtx(t, time.Minute), sb.ID, "big_mode", strings.NewReader("x"), 0o10000)
		if got := apiErr(err); got != "invalid/query_invalid" {
			t.Errorf("WriteFile(mode %#o) = %s, want invalid/query_invalid", 0o10000, got)
		}
		if s := hostFileState(filepath.Join(ws, "big_mode")); s != "absent" {
			t.Errorf("host big_mode after a refused upload = %q, want absent", s)
		}
	})
}

// TestFilesList covers listing and its pagination (FILE-15): pages are
// sorted, bounded by limit, and chained by cursors with no duplicate and
// no gap.
func TestFilesList(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	const n = 2500
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("f%04d", i))
	}
	// Created in reverse so that directory order is not name order.
	for _, name := range slices.Backward(want) {
		hostWriteFile(t, filepath.Join(ws, "many", name), name)
	}
	slices.Sort(want)
	hostWriteFile(t, filepath.Join(ws, "mixed", "a-file"), "abc")
	if err := os.Mkdir(filepath.Join(ws, "mixed", "b-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxOwns(t, filepath.Join(ws, "mixed", "b-dir"))
	if err := os.Symlink("a-file", filepath.Join(ws, "mixed", "c-link")); err != nil {
		t.Fatal(err)
	}

	t.Run("pages", func(t *testing.T) {
		t.Parallel()
		ctx := fileCtx(t, time.Minute)
		var got []string
		var sizes []int
		cursor := ""
		for page := 0; ; page++ {
			if page > n/1000+1 {
				t.Fatalf("more than %d pages for %d files with limit 1000", page, n)
			}
			l, err := d.Client.ListFiles(ctx, sb.ID, "many", cursor, 1000)
			if err != nil {
				t.Fatalf("ListFiles(many, cursor %q, 1000) = %s, want ok", cursor, apiErr(err))
			}
			sizes = append(sizes, len(l.Entries))
			for _, e := range l.Entries {
				if e.Path != "many/"+e.Name || e.Type != "file" || e.Size != 5 {
					t.Errorf("entry %+v, want path many/%s, type file, size 5", e, e.Name)
				}
				got = append(got, e.Name)
			}
			if l.NextCursor == "" {
				break
			}
			if len(l.Entries) == 0 || l.NextCursor != l.Entries[len(l.Entries)-1].Name {
				t.Fatalf("ListFiles(many, cursor %q, 1000).NextCursor = %q, want the page's last name", cursor, l.NextCursor)
			}
			cursor = l.NextCursor
		}
		if !slices.Equal(sizes, []int{1000, 1000, 500}) {
			t.Errorf("page sizes = %v, want [1000 1000 500]", sizes)
		}
		if !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("listed %d names, want %d sorted names with no duplicate or gap; first difference at %d", len(got), len(want), i)
		}
	})
	t.Run("default limit", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, "many", "", 0)
		if err != nil || len(l.Entries) != agent.DefaultListLimit || l.NextCursor != want[agent.DefaultListLimit-1] {
			t.Errorf("ListFiles(many, no limit) = %d entries, cursor %q, %s, want %d, %q", len(l.Entries), l.NextCursor, apiErr(err), agent.DefaultListLimit, want[agent.DefaultListLimit-1])
		}
	})
	t.Run("limit above the maximum", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, "many", "", 10*agent.MaxListLimit)
		if err != nil || len(l.Entries) != n || l.NextCursor != "" {
			t.Errorf("ListFiles(many, limit %d) = %d entries, cursor %q, %s, want all %d, no cursor", 10*agent.MaxListLimit, len(l.Entries), l.NextCursor, apiErr(err), n)
		}
	})
	t.Run("cursor between names", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, "many", "f0999~", 2)
		if err != nil || len(l.Entries) != 2 || l.Entries[0].Name != "f1000" || l.NextCursor != "f1001" {
			t.Errorf("ListFiles(many, cursor f0999~, 2) = %+v, %s, want f1000, f1001 and cursor f1001", l, apiErr(err))
		}
	})
	t.Run("types", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, "/workspace/mixed", "", 0)
		var got []string
		for _, e := range l.Entries {
			got = append(got, e.Name+":"+e.Type)
		}
		want := []string{"a-file:file", "b-dir:dir", "c-link:symlink"}
		if err != nil || !slices.Equal(got, want) || l.Path != "mixed" {
			t.Errorf("ListFiles(/workspace/mixed) = %s %v, %s, want mixed %v", l.Path, got, apiErr(err), want)
		}
	})
	t.Run("workspace root", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, "", "", 0)
		var got []string
		for _, e := range l.Entries {
			got = append(got, e.Name)
		}
		if err != nil || !slices.Equal(got, []string{"many", "mixed"}) {
			t.Errorf("ListFiles(\"\") = %v, %s, want [many mixed]", got, apiErr(err))
		}
	})
	for _, tt := range []struct{ path, want string }{
		{"mixed/a-file", fileNotDir},
		{"no-such-dir", fileNotFound},
		{"mixed/a-file/x", fileNotDir},
	} {
		t.Run("error "+tt.path, func(t *testing.T) {
			t.Parallel()
			_, err := d.Client.ListFiles(fileCtx(t, time.Minute), sb.ID, tt.path, "", 0)
			if got := apiErr(err); got != tt.want {
				t.Errorf("ListFiles(%q) = %s, want %s", tt.path, got, tt.want)
			}
		})
	}
}

// fileTree describes workspace content: "d/" is a directory, "f=x" a
// file holding x, "l->x" a symbolic link to x, and "!p" (in checks only)
// a path that must not exist.
type fileTree []string

func makeFileTree(t *testing.T, root string, tr fileTree) {
	t.Helper()
	for _, s := range tr {
		if p, target, ok := strings.Cut(s, "->"); ok {
			if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
			sandboxOwns(t, filepath.Join(root, p))
			continue
		}
		if p, ok := strings.CutSuffix(s, "/"); ok {
			if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
				t.Fatal(err)
			}
			sandboxOwns(t, filepath.Join(root, p))
			continue
		}
		p, data, _ := strings.Cut(s, "=")
		hostWriteFile(t, filepath.Join(root, p), data)
	}
}

func checkFileTree(t *testing.T, root string, tr fileTree) {
	t.Helper()
	for _, s := range tr {
		if p, want, ok := strings.Cut(s, "->"); ok {
			if got, err := os.Readlink(filepath.Join(root, p)); err != nil || got != want {
				t.Errorf("host readlink %s = %q, %v, want %q", p, got, err, want)
			}
			continue
		}
		var p, want string
		switch {
		case strings.HasPrefix(s, "!"):
			p, want = s[1:], "absent"
		case strings.HasSuffix(s, "/"):
			p, want = strings.TrimSuffix(s, "/"), "dir"
		default:
			p, want, _ = strings.Cut(s, "=")
		}
		if got := hostFileState(filepath.Join(root, p)); got != want {
			t.Errorf("host %s = %q, want %q", p, got, want)
		}
	}
}

func TestFilesMkdirMoveRemove(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	// An op is a file call on paths relative to a case's directory (p
	// makes them workspace paths), with a description for messages.
	type op struct {
		desc string
		do   func(ctx context.Context, c *client.Client, id string, p func(string) string) error
	}
	move := func(from, to string, overwrite bool) op {
		return op{fmt.Sprintf("Move(%s, %s, overwrite %v)", from, to, overwrite),
			func(ctx context.Context, c *client.Client, id string, p func(string) string) error {
				return c.Move(ctx, id, apitype.MoveRequest{From: p(from), To: p(to), Overwrite: overwrite})
			}}
	}
	remove := func(path string, recursive bool) op {
		return op{fmt.Sprintf("Remove(%s, recursive %v)", path, recursive),
			func(ctx context.Context, c *client.Client, id string, p func(string) string) error {
				return c.Remove(ctx, id, p(path), recursive)
			}}
	}
	mkdir := func(path string) op {
		return op{fmt.Sprintf("Mkdir(%s)", path),
			func(ctx context.Context, c *client.Client, id string, p func(string) string) error {
				return c.Mkdir(ctx, id, p(path))
			}}
	}
	// Each case works in its own directory; paths in setup, op and after
	// are relative to it.
	tests := []struct {
		name  string
		setup fileTree
		op    op
		want  string
		after fileTree
	}{
		{"mkdir nested", nil, mkdir("a/b/c"), fileOK, fileTree{"a/b/c/"}},
		{"mkdir existing dir", fileTree{"a/", "a/f=1"}, mkdir("a"), fileOK, fileTree{"a/f=1"}},
		{"mkdir over a file", fileTree{"f=1"}, mkdir("f"), fileExists, fileTree{"f=1"}},
		{"mkdir under a file", fileTree{"f=1"}, mkdir("f/sub"), fileNotDir, fileTree{"f=1"}},

		{"move file", fileTree{"a=1"}, move("a", "b", false), fileOK, fileTree{"!a", "b=1"}},
		{"move into new parents", fileTree{"a=1"}, move("a", "x/y/z", false), fileOK, fileTree{"!a", "x/y/z=1"}},
		{"move directory", fileTree{"d/", "d/f=1"}, move("d", "e", false), fileOK, fileTree{"!d", "e/f=1"}},
		{"move onto existing without overwrite", fileTree{"a=1", "b=2"}, move("a", "b", false), fileExists, fileTree{"a=1", "b=2"}},
		{"move onto existing with overwrite", fileTree{"a=1", "b=2"}, move("a", "b", true), fileOK, fileTree{"!a", "b=1"}},
		{"move missing", nil, move("nothing", "b", false), fileNotFound, fileTree{"!b"}},
		{"move symlink itself", fileTree{"real=1", "link->real"}, move("link", "moved", false), fileOK, fileTree{"real=1", "!link", "moved->real"}},
		{"move directory into itself", fileTree{"d/", "d/f=1"}, move("d", "d/sub/x", false), filePathInvalid, fileTree{"d/f=1", "!d/sub"}},
		{"move directory into itself through a link", fileTree{"d/", "d/f=1", "l->d"}, move("d", "l/x", false), filePathInvalid, fileTree{"d/f=1", "!d/x", "l->d"}},
		{"move file onto itself", fileTree{"a=1"}, move("a", "a", true), fileOK, fileTree{"a=1"}},
		{"move directory onto a directory", fileTree{"d/", "d/f=1", "e/", "e/g=2"}, move("d", "e", true), fileExists, fileTree{"d/f=1", "e/g=2"}},
		{"move from workspace root", fileTree{"a=1"}, op{"Move(/workspace, root)", func(ctx context.Context, c *client.Client, id string, p func(string) string) error {
			return c.Move(ctx, id, apitype.MoveRequest{From: "/workspace", To: p("root")})
		}}, fileRootOp, fileTree{"a=1", "!root"}},
		{"move onto workspace root", fileTree{"a=1"}, op{"Move(a, ., overwrite true)", func(ctx context.Context, c *client.Client, id string, p func(string) string) error {
			return c.Move(ctx, id, apitype.MoveRequest{From: p("a"), To: ".", Overwrite: true})
		}}, fileRootOp, fileTree{"a=1"}},

		{"remove file", fileTree{"f=1"}, remove("f", false), fileOK, fileTree{"!f"}},
		{"remove empty dir", fileTree{"d/"}, remove("d", false), fileOK, fileTree{"!d"}},
		{"remove non-empty dir", fileTree{"d/", "d/f=1"}, remove("d", false), fileNotEmpty, fileTree{"d/f=1"}},
		{"remove non-empty dir recursively", fileTree{"d/e/", "d/e/f=1", "d/g=2"}, remove("d", true), fileOK, fileTree{"!d"}},
		{"remove missing", nil, remove("nothing", false), fileNotFound, nil},
		{"remove missing recursively", nil, remove("nothing", true), fileNotFound, nil},
		{"remove symlink to a directory", fileTree{"d/", "d/f=1", "l->d"}, remove("l", false), fileOK, fileTree{"!l", "d/f=1"}},
		{"remove symlink to a directory recursively", fileTree{"d/", "d/f=1", "l->d"}, remove("l", true), fileOK, fileTree{"!l", "d/f=1"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := fmt.Sprintf("case%02d", i)
			root := filepath.Join(ws, dir)
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			sandboxOwns(t, root)
			makeFileTree(t, root, tt.setup)
			p := func(s string) string { return dir + "/" + s }
			err := tt.op.do(fileCtx(t, time.Minute), d.Client, sb.ID, p)
			if got := apiErr(err); got != tt.want {
				t.Errorf("%s = %s, want %s", tt.op.desc, got, tt.want)
			}
			checkFileTree(t, root, tt.after)
		})
	}

	// Removing the workspace itself, or uploading onto it, is refused
	// however it is spelled. A separate sandbox, so that a failure cannot wipe the
	// cases above.
	t.Run("workspace root", func(t *testing.T) {
		t.Parallel()
		sb, ws := newFileSandbox(t, d)
		makeFileTree(t, ws, fileTree{"keep=1", "d/"})
		ctx := fileCtx(t, time.Minute)
		for _, p := range []string{".", "/workspace", "/workspace/", "d/..", "./"} {
			if got := apiErr(d.Client.Remove(ctx, sb.ID, p, true)); got != fileRootOp {
				t.Errorf("Remove(%q, recursive) = %s, want %s", p, got, fileRootOp)
			}
			if got := apiErr(d.Client.Remove(ctx, sb.ID, p, false)); got != fileRootOp {
				t.Errorf("Remove(%q) = %s, want %s", p, got, fileRootOp)
			}
			if _, err := d.Client.WriteFile(ctx, sb.ID, p, strings.NewReader("x"), 0); apiErr(err) != fileRootOp {
				t.Errorf("WriteFile(%q) = %s, want %s", p, apiErr(err), fileRootOp)
			}
		}
		if got := apiErr(d.Client.Remove(ctx, sb.ID, "", true)); got != filePathInvalid {
			t.Errorf("Remove(\"\", recursive) = %s, want %s", got, filePathInvalid)
		}
		checkFileTree(t, ws, fileTree{"keep=1", "d/"})
		// Positive control: the same call on a path inside works.
		if got := apiErr(d.Client.Remove(ctx, sb.ID, "d", true)); got != fileOK {
			t.Errorf("Remove(d, recursive) = %s, want ok", got)
		}
		checkFileTree(t, ws, fileTree{"keep=1", "!d"})
	})
}

func TestFilesReadErrors(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	makeFileTree(t, ws, fileTree{"dir/", "f=1"})
	tests := []struct {
		name, path, want string
	}{
		{"directory", "dir", fileIsDir},
		{"workspace root", ".", fileIsDir},
		{"workspace root absolute", "/workspace", fileIsDir},
		{"missing", "nothing", fileNotFound},
		{"missing parent", "no/such/file", fileNotFound},
		{"parent is a file", "f/x", fileNotDir},
		{"empty path", "", filePathInvalid},
		{"control", "f", fileOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := catFile(fileCtx(t, time.Minute), d.Client, sb.ID, tt.path)
			if got := apiErr(err); got != tt.want {
				t.Errorf("ReadFile(%q) = %s, want %s", tt.path, got, tt.want)
			}
		})
	}
	t.Run("unknown sandbox", func(t *testing.T) {
		t.Parallel()
		_, err := catFile(fileCtx(t, time.Minute), d.Client, "sbx_00000000000000000000000000000000", "f")
		if !errcode.Is(err, errcode.NotFound) {
			t.Errorf("ReadFile(unknown sandbox, f) = %s, want not_found", apiErr(err))
		}
	})
}

// fileOps are the file API calls a path probe goes through: every one of
// them must validate its path.
var fileOps = []struct {
	name string
	// json is set when the path travels in a JSON body, where
	// encoding/json turns invalid UTF-8 into U+FFFD: such a path reaches
	// the agent as a different, valid one.
	json bool
	// writes is set for calls that change what the path names.
	writes bool
	do     func(ctx context.Context, c *client.Client, id, p string) error
}{
	{"ReadFile", false, false, func(ctx context.Context, c *client.Client, id, p string) error {
		_, err := catFile(ctx, c, id, p)
		return err
	}},
	{"ListFiles", false, false, func(ctx context.Context, c *client.Client, id, p string) error {
		_, err := c.ListFiles(ctx, id, p, "", 0)
		return err
	}},
	{"WriteFile", false, true, func(ctx context.Context, c *client.Client, id, p string) error {
		_, err := c.WriteFile(ctx, id, p, strings.NewReader("PWNED"), 0)
		return err
	}},
	{"Mkdir", true, true, func(ctx context.Context, c *client.Client, id, p string) error {
		return c.Mkdir(ctx, id, p)
	}},
	{"Remove", false, true, func(ctx context.Context, c *client.Client, id, p string) error {
		return c.Remove(ctx, id, p, true)
	}},
	{"Move from", true, true, func(ctx context.Context, c *client.Client, id, p string) error {
		return c.Move(ctx, id, apitype.MoveRequest{From: p, To: "moved-here", Overwrite: true})
	}},
	{"Move to", true, true, func(ctx context.Context, c *client.Client, id, p string) error {
		return c.Move(ctx, id, apitype.MoveRequest{From: "movable", To: p, Overwrite: true})
	}},
}

// TestFilesPathValidation covers the lexical probes of FILE-01, FILE-02,
// FILE-04 and FILE-16 through every file call. Each probe is paired with a
// positive control: a path that stays inside and reads the workspace's
// copy of the target, and, where the probe names a real host file, proof
// that the file is there (so a refusal cannot come from a missing target).
func TestFilesPathValidation(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	outside := filepath.Dir(ws) // the sandbox's directory, next to the workspace
	hostPasswd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	makeFileTree(t, ws, fileTree{"etc/passwd=workspace passwd", "x=workspace x", "a=workspace a", "movable=m"})
	hostWriteFile(t, filepath.Join(outside, "x"), "OUTSIDE x")
	// Names Linux allows but the API refuses: planted on the host so that
	// each probe aims at a file that exists.
	weird := []string{"a\nb", "a\rb", "a\tb", "a\x1bb", "a\x7fb", "a\u0085b", "a\xffb"}
	for _, n := range weird {
		hostWriteFile(t, filepath.Join(ws, n), "weird")
	}
	seg := strings.Repeat("d", 99)
	longOK := strings.Repeat(seg+"/", 39) + "f.txt" // 3905 bytes: long but valid
	putFile(t, d.Client, sb.ID, longOK, []byte("long"), 0)
	name255 := strings.Repeat("n", 255)
	putFile(t, d.Client, sb.ID, "c/"+name255, []byte("255"), 0)
	deepOK := strings.Repeat("n/", 100) + "f"
	putFile(t, d.Client, sb.ID, deepOK, []byte("deep"), 0)

	type probe struct {
		id, name string
		path     string
		want     string
		control  string // inside the workspace; must read data
		data     string
		// host, if set, is the host file the probe would reach if it
		// were resolved naively; it must exist and be left unchanged.
		host string
		// readOnly probes aim at the host's own files: they only go
		// through calls that read, so that a regression fails the test
		// instead of damaging the machine running it.
		readOnly bool
	}
	tests := []probe{
		{"FILE-01", "climb to host passwd", strings.Repeat("../", 12) + "etc/passwd", fileEscapes, "etc/passwd", "workspace passwd", "/etc/passwd", true},
		{"FILE-01", "climb three", "../../../etc/passwd", fileEscapes, "etc/passwd", "workspace passwd", "", false},
		{"FILE-01", "climb after descent", "a/../../x", fileEscapes, "a/../x", "workspace x", filepath.Join(outside, "x"), false},
		{"FILE-01", "climb one", "../x", fileEscapes, "x", "workspace x", filepath.Join(outside, "x"), false},
		{"FILE-01", "dotdot", "..", fileEscapes, "x", "workspace x", "", false},
		// Absolute paths are refused unless under /workspace, where the
		// workspace appears in isolated sandboxes; those are taken as
		// relative to the workspace (the control column).
		{"FILE-02", "absolute host passwd", "/etc/passwd", fileEscapes, "/workspace/etc/passwd", "workspace passwd", "/etc/passwd", true},
		{"FILE-02", "absolute climbing out of workspace", "/workspace/../etc/passwd", fileEscapes, "/workspace/etc/passwd", "workspace passwd", "/etc/passwd", true},
		{"FILE-02", "absolute prefix lookalike", "/workspaces/x", fileEscapes, "/workspace/x", "workspace x", "", true},
		{"FILE-02", "absolute root", "/", fileEscapes, "/workspace/x", "workspace x", "", true},
		{"FILE-04", "NUL then climb", "a\x00/../../etc", filePathInvalid, "a", "workspace a", "", false},
		{"FILE-04", "NUL", "a\x00b", filePathInvalid, "a", "workspace a", "", false},
	}
	for _, n := range weird {
		tests = append(tests, probe{"FILE-04", fmt.Sprintf("control character %q", n), n, filePathInvalid, "a", "workspace a", filepath.Join(ws, n), false})
	}
	tests = append(tests,
		probe{"FILE-16", "5000-byte path", strings.Repeat(seg+"/", 50), fileTooLong, longOK, "long", "", false},
		probe{"FILE-16", "4097-byte path", strings.Repeat("e", agent.MaxPathBytes+1), fileTooLong, longOK, "long", "", false},
		probe{"FILE-16", "300-byte component", "c/" + strings.Repeat("n", 300), fileTooLong, "c/" + name255, "255", "", false},
		probe{"FILE-16", "256-byte component", "c/" + strings.Repeat("n", 256), fileTooLong, "c/" + name255, "255", "", false},
		probe{"FILE-16", "10k-deep nesting", strings.Repeat("n/", 10000) + "f", fileTooLong, deepOK, "deep", "", false},
	)
	// Every subtest must see the planted files as they were.
	hostBefore := map[string]string{}
	for _, tt := range tests {
		if tt.host != "" {
			hostBefore[tt.host] = hostFileState(tt.host)
		}
	}
	if hostBefore["/etc/passwd"] != string(hostPasswd) || hostBefore[filepath.Join(outside, "x")] != "OUTSIDE x" {
		t.Fatal("planted host files are not readable")
	}

	t.Run("probes", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.id+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := fileCtx(t, 30*time.Second) // a hang fails, it does not stall
				for _, op := range fileOps {
					if op.json && !utf8.ValidString(tt.path) || op.writes && tt.readOnly {
						continue
					}
					if got := apiErr(op.do(ctx, d.Client, sb.ID, tt.path)); got != tt.want {
						t.Errorf("%s(%.60q) = %s, want %s", op.name, tt.path, got, tt.want)
					}
				}
				// Positive controls.
				got, err := catFile(ctx, d.Client, sb.ID, tt.control)
				if err != nil || string(got) != tt.data {
					t.Errorf("control: ReadFile(%.60q) = %q, %s, want %q", tt.control, got, apiErr(err), tt.data)
				}
				if tt.host != "" && hostBefore[tt.host] == "absent" {
					t.Errorf("control: host %q is absent, want the probe's target to exist", tt.host)
				}
			})
		}
	})
	for h, before := range hostBefore {
		if got := hostFileState(h); got != before {
			t.Errorf("host %q after the probes = %.40q, want it unchanged (%.40q)", h, got, before)
		}
	}
	checkFileTree(t, ws, fileTree{"!moved-here", "movable=m", "x=workspace x"})
	if s := hostFileState(filepath.Join(ws, "etc")); s != "dir" {
		t.Errorf("host etc = %q, want dir", s)
	}
	// Positive control for FILE-01: resolved naively (lexically, as
	// filepath.Join does), the climbing probe really names the host's
	// /etc/passwd.
	if got, err := os.ReadFile(filepath.Join(ws, strings.Repeat("../", 12)+"etc/passwd")); err != nil || !bytes.Equal(got, hostPasswd) {
		t.Errorf("control: host read of the workspace joined with the climbing probe = %v, want /etc/passwd's content", err)
	}
}

// TestFilesSymlinkEscapes covers FILE-05 and FILE-06: symbolic links made
// inside the sandbox, absolute or relative, never lead the API out of the
// workspace. The positive control of each probe reads the same path on the
// host, where the kernel follows the links, and gets the outside file.
func TestFilesSymlinkEscapes(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	secretName := "berth-secret-" + rand.Text()
	secretPath := filepath.Join(filepath.Dir(ws), secretName)
	secret := "HOST SECRET " + rand.Text()
	hostWriteFile(t, secretPath, secret)
	hostPasswd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	// Made by the sandbox itself, as an agent's code would.
	runScript(t, d, sb.ID, strings.Join([]string{
		"ln -s / root",
		"ln -s /etc/passwd p",
		"ln -s " + secretPath + " abs",
		"ln -s .. up",
		"ln -s ../ up2",
		"mkdir -p dir && ln -s ../../ dir/link",
		"ln -s ../" + secretName + " upfile",
		"mkdir -p deep/er && ln -s ../../../" + secretName + " deep/er/link",
		// link -> a/b/NAME, a/b -> e, a/e -> ../.. : link is ../NAME
		"mkdir -p a && ln -s e a/b && ln -s ../.. a/e && ln -s a/b/" + secretName + " chain",
		// A link into a directory that then climbs: in/up -> .., so
		// in/up/up is the sandbox directory.
		"mkdir -p in && ln -s .. in/up",
	}, " && "))

	tests := []struct {
		id, path string
		want     string // the host content at path, through the links
	}{
		{"FILE-05", "root/etc/passwd", string(hostPasswd)},
		{"FILE-05", "p", string(hostPasswd)},
		{"FILE-05", "abs", secret},
		{"FILE-06", "up/" + secretName, secret},
		{"FILE-06", "up2/" + secretName, secret},
		{"FILE-06", "dir/link/" + secretName, secret},
		{"FILE-06", "upfile", secret},
		{"FILE-06", "deep/er/link", secret},
		{"FILE-06", "chain", secret},
		{"FILE-06", "in/up/up/" + secretName, secret},
	}
	if b, err := os.ReadFile("/etc/shadow"); err == nil {
		tests = append(tests, struct{ id, path, want string }{"FILE-05", "root/etc/shadow", string(b)})
	}
	for _, tt := range tests {
		t.Run(tt.id+" read "+tt.path, func(t *testing.T) {
			t.Parallel()
			if got, err := os.ReadFile(filepath.Join(ws, tt.path)); err != nil || string(got) != tt.want {
				t.Fatalf("control: host os.ReadFile(workspace/%s) = %.40q, %v, want the outside file", tt.path, got, err)
			}
			got, err := catFile(fileCtx(t, 30*time.Second), d.Client, sb.ID, tt.path)
			if apiErr(err) != fileEscapes {
				t.Errorf("ReadFile(%q) = %.40q, %s, want %s", tt.path, got, apiErr(err), fileEscapes)
			}
		})
	}
	for _, p := range []string{"root", "root/etc", "up", "up2", "dir/link", "a/e", "a/b", "in/up/up"} {
		t.Run("list "+p, func(t *testing.T) {
			t.Parallel()
			if entries, err := os.ReadDir(filepath.Join(ws, p)); err != nil || len(entries) == 0 {
				t.Fatalf("control: host os.ReadDir(workspace/%s) = %d entries, %v, want the outside directory", p, len(entries), err)
			}
			l, err := d.Client.ListFiles(fileCtx(t, 30*time.Second), sb.ID, p, "", 0)
			if apiErr(err) != fileEscapes {
				t.Errorf("ListFiles(%q) = %d entries, %s, want %s", p, len(l.Entries), apiErr(err), fileEscapes)
			}
		})
	}
	if got := hostFileState(secretPath); got != secret {
		t.Errorf("host secret after the probes = %q, want it unchanged", got)
	}
}

// TestFilesSymlinksInside is the positive control of the symlink probes:
// links that stay inside the workspace are followed.
func TestFilesSymlinksInside(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	makeFileTree(t, ws, fileTree{"sub/real.txt=real", "dir/"})
	runScript(t, d, sb.ID, strings.Join([]string{
		"ln -s sub/real.txt in",
		"ln -s sub insub",
		"ln -s ../sub/real.txt dir/in",
		"ln -s . self",
		// chain -> a/b/real.txt, a/b -> e, a/e -> ../sub: stays inside.
		"mkdir -p a && ln -s e a/b && ln -s ../sub a/e && ln -s a/b/real.txt chain",
		"ln -s nothing dangling",
		"ln -s loop1 loop2 && ln -s loop2 loop1",
	}, " && "))
	ctx := fileCtx(t, time.Minute)
	for _, tt := range []struct{ path, want string }{
		{"in", fileOK}, {"insub/real.txt", fileOK}, {"dir/in", fileOK}, {"self/sub/real.txt", fileOK},
		{"self/self/insub/real.txt", fileOK}, {"chain", fileOK}, {"a/e/real.txt", fileOK},
		{"dangling", fileNotFound}, {"loop1", fileIsSymlink},
	} {
		got, err := catFile(ctx, d.Client, sb.ID, tt.path)
		if apiErr(err) != tt.want || (tt.want == fileOK && string(got) != "real") {
			t.Errorf("ReadFile(%q) = %q, %s, want %s", tt.path, got, apiErr(err), tt.want)
		}
	}
	l, err := d.Client.ListFiles(ctx, sb.ID, "insub", "", 0)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "real.txt" {
		t.Errorf("ListFiles(insub) = %+v, %s, want real.txt", l.Entries, apiErr(err))
	}
	// Writing through a directory link inside lands in its target.
	if _, err := d.Client.WriteFile(ctx, sb.ID, "insub/new.txt", strings.NewReader("new"), 0); err != nil {
		t.Errorf("WriteFile(insub/new.txt) = %s, want ok", apiErr(err))
	}
	checkFileTree(t, ws, fileTree{"sub/new.txt=new"})
	// The final component is never followed on upload, even inside.
	if _, err := d.Client.WriteFile(ctx, sb.ID, "in", strings.NewReader("overwritten"), 0); apiErr(err) != fileIsSymlink {
		t.Errorf("WriteFile(in) onto a symlink = %s, want %s", apiErr(err), fileIsSymlink)
	}
	checkFileTree(t, ws, fileTree{"sub/real.txt=real"})
	if got, err := os.Readlink(filepath.Join(ws, "in")); err != nil || got != "sub/real.txt" {
		t.Errorf("host readlink in = %q, %v, want sub/real.txt", got, err)
	}
}

// TestFilesWriteThroughSymlinks covers FILE-08: writes, directory
// creation, removal and moves through links that lead out of the
// workspace are refused and change nothing outside. The positive control
// of each probe does the same operation on the host, through the same
// path, and sees the outside change.
func TestFilesWriteThroughSymlinks(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	out := testenv.ShortTempDir(t) // a directory outside, unique to this test
	rel, err := filepath.Rel(ws, out)
	if err != nil {
		t.Fatal(err)
	}
	makeFileTree(t, out, fileTree{"victim-write=VICTIM", "victim-rm=VICTIM", "victim-rmdir/f=VICTIM", "victim-mv=VICTIM", "victim-keep=VICTIM"})
	makeFileTree(t, ws, fileTree{"sub/", "local-mv=local", "rmtree/"})
	for link, target := range map[string]string{
		"out":           filepath.Join(out, "out-x"), // absolute, dangling
		"rout":          filepath.Join(rel, "rout-x"),
		"outfile":       filepath.Join(out, "victim-write"),
		"outdir":        out,
		"routdir":       rel,
		"sub/routdir2":  filepath.Join("..", rel),
		"rmtree/outdir": out,
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
		sandboxOwns(t, filepath.Join(ws, link))
	}

	c, id := d.Client, sb.ID
	write := func(p string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.WriteFile(ctx, id, p, strings.NewReader("PWNED"), 0)
			return err
		}
	}
	hostWriteOp := func(p string) func() error {
		return func() error { return os.WriteFile(filepath.Join(ws, p), []byte("PWNED"), 0o644) }
	}
	tests := []struct {
		name    string
		api     func(context.Context) error
		outside string // the name in out the probe aims at
		host    func() error
	}{
		{"write onto absolute symlink", write("out"), "out-x", hostWriteOp("out")},
		{"write onto relative symlink", write("rout"), "rout-x", hostWriteOp("rout")},
		{"write onto symlink to existing file", write("outfile"), "victim-write", hostWriteOp("outfile")},
		{"write through absolute dir symlink", write("outdir/w1"), "w1", hostWriteOp("outdir/w1")},
		{"write through relative dir symlink", write("routdir/w2"), "w2", hostWriteOp("routdir/w2")},
		{"write through nested relative dir symlink", write("sub/routdir2/w3"), "w3", hostWriteOp("sub/routdir2/w3")},
		{"write creating parents through dir symlink", write("outdir/w4/deeper/f"), "w4",
			func() error { return os.MkdirAll(filepath.Join(ws, "outdir/w4/deeper"), 0o755) }},
		{"mkdir through dir symlink", func(ctx context.Context) error { return c.Mkdir(ctx, id, "routdir/m1") }, "m1",
			func() error { return os.Mkdir(filepath.Join(ws, "routdir/m1"), 0o755) }},
		{"remove through dir symlink", func(ctx context.Context) error { return c.Remove(ctx, id, "outdir/victim-rm", false) }, "victim-rm",
			func() error { return os.Remove(filepath.Join(ws, "outdir/victim-rm")) }},
		{"recursive remove through dir symlink", func(ctx context.Context) error { return c.Remove(ctx, id, "routdir/victim-rmdir", true) }, "victim-rmdir",
			func() error { return os.RemoveAll(filepath.Join(ws, "routdir/victim-rmdir")) }},
		{"move out through dir symlink", func(ctx context.Context) error {
			return c.Move(ctx, id, apitype.MoveRequest{From: "local-mv", To: "outdir/mv-in"})
		}, "mv-in", func() error { return hostMove(filepath.Join(ws, "local-mv"), filepath.Join(ws, "outdir/mv-in")) }},
		{"move in through dir symlink", func(ctx context.Context) error {
			return c.Move(ctx, id, apitype.MoveRequest{From: "routdir/victim-mv", To: "stolen"})
		}, "victim-mv", func() error {
			return hostMove(filepath.Join(ws, "routdir/victim-mv"), filepath.Join(ws, "stolen-by-host"))
		}},
	}
	t.Run("probes", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				target := filepath.Join(out, tt.outside)
				before := hostFileState(target)
				if got := apiErr(tt.api(fileCtx(t, 30*time.Second))); got != fileEscapes {
					t.Errorf("%s = %s, want %s", tt.name, got, fileEscapes)
				}
				if got := hostFileState(target); got != before {
					t.Fatalf("host %s after a refused %s = %q, want it unchanged (%q)", target, tt.name, got, before)
				}
				// Positive control: the same operation on the host, through
				// the same links, reaches outside.
				if err := tt.host(); err != nil {
					t.Fatalf("control: host %s: %v", tt.name, err)
				}
				if got := hostFileState(target); got == before {
					t.Errorf("control: host %s left %s unchanged (%q), want the probe to reach it", tt.name, target, got)
				}
			})
		}
	})
	checkFileTree(t, ws, fileTree{"!stolen"})
	if left := uploadLeftovers(out); len(left) != 0 {
		t.Errorf("upload temporary files outside: %q", left)
	}

	// Removing a link, or a tree holding one, removes the link and never
	// what it points at.
	ctx := fileCtx(t, time.Minute)
	if got, err := os.ReadFile(filepath.Join(ws, "rmtree/outdir/victim-keep")); err != nil || string(got) != "VICTIM" {
		t.Fatalf("control: host read of rmtree/outdir/victim-keep = %q, %v, want the outside file", got, err)
	}
	if err := c.Remove(ctx, id, "rmtree", true); err != nil {
		t.Errorf("Remove(rmtree, recursive) = %s, want ok", apiErr(err))
	}
	if err := c.Remove(ctx, id, "outdir", false); err != nil {
		t.Errorf("Remove(outdir) = %s, want ok", apiErr(err))
	}
	checkFileTree(t, ws, fileTree{"!rmtree", "!outdir"})
	checkFileTree(t, out, fileTree{"victim-keep=VICTIM"})
}

// TestFilesSpecialFiles covers FILE-10: FIFOs, sockets and device nodes are
// refused at once, and a FIFO never blocks the agent.
func TestFilesSpecialFiles(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	makeFileTree(t, ws, fileTree{"regular=content"})
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hasDevice := unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil
	if err := os.Symlink("fifo", filepath.Join(ws, "fifolink")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"fifo", "sock", "fifolink"} {
		sandboxOwns(t, filepath.Join(ws, n))
	}

	tests := []struct {
		name, path string
		mode       fs.FileMode // the type the host sees, through links
		// control shows that the file works on the host.
		control func(p string) error
	}{
		{"FIFO", "fifo", fs.ModeNamedPipe, func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"symlink to FIFO", "fifolink", fs.ModeNamedPipe, nil},
		{"unix socket", "sock", fs.ModeSocket, func(p string) error {
			c, err := net.Dial("unix", p)
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"char device 1,3", "null", fs.ModeDevice | fs.ModeCharDevice, func(p string) error {
			b, err := os.ReadFile(p) // /dev/null: empty, at once
			if err == nil && len(b) != 0 {
				err = fmt.Errorf("read %d bytes from a /dev/null node", len(b))
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.path == "null" && !hasDevice {
				testenv.Missing(t, "mknod of a character device is not permitted here")
			}
			p := filepath.Join(ws, tt.path)
			if fi, err := os.Stat(p); err != nil || fi.Mode().Type() != tt.mode {
				t.Fatalf("control: host os.Stat(%s) = %v, %v, want type %v", tt.path, fi.Mode(), err, tt.mode)
			}
			// An isolated sandbox's workspace is mounted nodev: there the
			// type check above is the control.
			if tt.control != nil && (tt.path != "null" || !mountedNodev(ws)) {
				if err := tt.control(p); err != nil {
					t.Fatalf("control: host use of %s: %v", tt.path, err)
				}
			}
			// A few seconds each: the refusal must be immediate, never a
			// blocked open.
			ctx := func() context.Context { return fileCtx(t, 5*time.Second) }
			if _, err := catFile(ctx(), d.Client, sb.ID, tt.path); apiErr(err) != fileNotRegular {
				t.Errorf("ReadFile(%s) = %s, want %s", tt.path, apiErr(err), fileNotRegular)
			}
			if _, err := d.Client.ListFiles(ctx(), sb.ID, tt.path, "", 0); apiErr(err) != fileNotDir {
				t.Errorf("ListFiles(%s) = %s, want %s", tt.path, apiErr(err), fileNotDir)
			}
			want := fileNotRegular
			if tt.path == "fifolink" {
				want = fileIsSymlink // the final component of an upload is never followed
			}
			if _, err := d.Client.WriteFile(ctx(), sb.ID, tt.path, strings.NewReader("x"), 0); apiErr(err) != want {
				t.Errorf("WriteFile(%s) = %s, want %s", tt.path, apiErr(err), want)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Type() != tt.mode {
				t.Errorf("host os.Stat(%s) after the probes = %v, %v, want type %v unchanged", tt.path, fi.Mode(), err, tt.mode)
			}
		})
	}
	t.Run("FIFO left without a reader", func(t *testing.T) {
		t.Parallel()
		// After refused reads, no agent goroutine holds the FIFO open for
		// reading: a non-blocking writer finds no reader (ENXIO).
		p := filepath.Join(ws, "fifo")
		ctx := fileCtx(t, 5*time.Second)
		for range 3 {
			catFile(ctx, d.Client, sb.ID, "fifo")
			d.Client.ListFiles(ctx, sb.ID, "fifo", "", 0)
		}
		if testenv.Runtime() == "gvisor" {
			t.Skip("under gVisor the gofer, not the agent, holds host files open")
		}
		if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); !errors.Is(err, syscall.ENXIO) {
			if err == nil {
				syscall.Close(fd)
			}
			t.Errorf("host open(fifo, O_WRONLY|O_NONBLOCK) = %v, want ENXIO: someone holds the FIFO open", err)
		}
		// Positive control: with a reader, the same open succeeds.
		r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatalf("control: host open(fifo, O_WRONLY|O_NONBLOCK) with a reader = %v, want success", err)
		}
		syscall.Close(fd)
	})
	t.Run("listed as other", func(t *testing.T) {
		t.Parallel()
		l, err := d.Client.ListFiles(fileCtx(t, 5*time.Second), sb.ID, ".", "", 0)
		types := map[string]string{}
		for _, e := range l.Entries {
			types[e.Name] = e.Type
		}
		want := map[string]string{"fifo": "other", "sock": "other", "fifolink": "symlink", "regular": "file"}
		if hasDevice {
			want["null"] = "other"
		}
		for name, typ := range want {
			if types[name] != typ {
				t.Errorf("ListFiles(.) type of %s = %q, %s, want %q", name, types[name], apiErr(err), typ)
			}
		}
	})
	t.Run("control regular file", func(t *testing.T) {
		t.Parallel()
		got, err := catFile(fileCtx(t, 5*time.Second), d.Client, sb.ID, "regular")
		if err != nil || string(got) != "content" {
			t.Errorf("ReadFile(regular) = %q, %s, want %q", got, apiErr(err), "content")
		}
	})
}

// TestFilesDownloadCap covers the download cap of FILE-15 with a sparse
// file just above it: refused from its size, without streaming it.
func TestFilesDownloadCap(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	for name, size := range map[string]int64{"huge": agent.DefaultMaxDownload + 1, "small": 1 << 20} {
		f, err := os.Create(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	ctx := fileCtx(t, 30*time.Second)
	if _, err := catFile(ctx, d.Client, sb.ID, "huge"); apiErr(err) != "payload_too_large/file_too_large" {
		t.Errorf("ReadFile(huge, %d bytes) = %s, want payload_too_large/file_too_large", agent.DefaultMaxDownload+1, apiErr(err))
	}
	// Positive control: a sparse file under the cap downloads whole.
	got, err := catFile(ctx, d.Client, sb.ID, "small")
	if err != nil || !bytes.Equal(got, make([]byte, 1<<20)) {
		t.Errorf("ReadFile(small, 1 MiB sparse) = %d bytes, %s, want 1 MiB of zeros", len(got), apiErr(err))
	}
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("client-side read failure")
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// stallingReader yields n bytes, then blocks until stop is closed.
type stallingReader struct {
	n    int
	stop chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		<-r.stop
		return 0, errors.New("stopped")
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// TestFilesFailedUploadLeavesNothing checks that an upload that fails,
// early or half-way, leaves neither a partial file nor a temporary file,
// and that the file it would have replaced is intact.
func TestFilesFailedUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb, ws := newFileSandbox(t, d)
	makeFileTree(t, ws, fileTree{"f.txt=file", "dir/", "keep.txt=original"})

	// Positive control of the leftover check itself.
	hostWriteFile(t, filepath.Join(ws, "dir", ".berth-upload-control"), "")
	if left := uploadLeftovers(ws); len(left) != 1 {
		t.Fatalf("control: uploadLeftovers found %q, want the planted temporary file", left)
	}
	os.Remove(filepath.Join(ws, "dir", ".berth-upload-control"))

	for _, tt := range []struct{ name, path, want string }{
		{"parent is a regular file", "f.txt/x", fileNotDir},
		{"deeper parent is a regular file", "f.txt/x/y", fileNotDir},
		{"target is a directory", "dir", fileIsDir},
		{"workspace root", "/workspace", fileRootOp},
	} {
		_, err := d.Client.WriteFile(fileCtx(t, 30*time.Second), sb.ID, tt.path, strings.NewReader("data"), 0)
		if got := apiErr(err); got != tt.want {
			t.Errorf("WriteFile(%q) (%s) = %s, want %s", tt.path, tt.name, got, tt.want)
		}
	}
	checkFileTree(t, ws, fileTree{"f.txt=file", "dir/"})
	checkNoLeftovers(t, ws)

	t.Run("body fails half-way", func(t *testing.T) {
		for _, p := range []string{"keep.txt", "new.txt"} {
			_, err := d.Client.WriteFile(fileCtx(t, 30*time.Second), sb.ID, p, chunkedBody{&failingReader{n: 256 << 10}}, 0)
			if err == nil {
				t.Errorf("WriteFile(%s) with a failing body = ok, want an error", p)
			}
		}
		checkNoLeftovers(t, ws)
		checkFileTree(t, ws, fileTree{"keep.txt=original", "!new.txt"})
	})
	t.Run("client gives up half-way", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := &stallingReader{n: 256 << 10, stop: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := d.Client.WriteFile(ctx, sb.ID, "keep.txt", chunkedBody{r}, 0)
			done <- err
		}()
		// Positive control: the upload did reach the agent, which holds
		// a temporary file for it.
		testenv.Eventually(t, 10*time.Second, "a temporary file for the upload in progress", func() bool {
			return len(uploadLeftovers(ws)) == 1
		})
		cancel()
		close(r.stop)
		if err := <-done; err == nil {
			t.Error("WriteFile(keep.txt) canceled half-way = ok, want an error")
		}
		checkNoLeftovers(t, ws)
		checkFileTree(t, ws, fileTree{"keep.txt=original"})
	})
}

// TestFilesUploadTooLarge covers the upload cap of FILE-14: above it the
// upload is refused with 413 whether or not the client announces the size,
// and nothing is left behind. The cap itself is accepted (positive
// control).
func TestFilesUploadTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.MaxUpload = limit })
	sb, ws := newFileSandbox(t, d)
	tests := []struct {
		name    string
		size    int
		chunked bool
		want    errcode.Code // "" for success
	}{
		{"at the cap with length", limit, false, ""},
		{"at the cap chunked", limit, true, ""},
		{"one over with length", limit + 1, false, errcode.PayloadTooLarge},
		{"one over chunked", limit + 1, true, errcode.PayloadTooLarge},
		{"far over with length", 8 * limit, false, errcode.PayloadTooLarge},
		{"far over chunked", 8 * limit, true, errcode.PayloadTooLarge},
	}
	t.Run("uploads", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				p := strings.ReplaceAll(tt.name, " ", "_")
				var body io.Reader = bytes.NewReader(make([]byte, tt.size))
				if tt.chunked {
					body = chunkedBody{body}
				}
				fi, err := d.Client.WriteFile(fileCtx(t, time.Minute), sb.ID, p, body, 0)
				if tt.want == "" {
					if err != nil || fi.Size != int64(tt.size) {
						t.Errorf("WriteFile(%d bytes, chunked %v) = size %d, %s, want ok", tt.size, tt.chunked, fi.Size, apiErr(err))
					}
					return
				}
				if got := errcode.CodeOf(err); got != tt.want {
					t.Errorf("WriteFile(%d bytes, chunked %v) = %s, want %s", tt.size, tt.chunked, apiErr(err), tt.want)
				}
				checkFileTree(t, ws, fileTree{"!" + p})
			})
		}
	})
	checkNoLeftovers(t, ws)
}
