package agent

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/errcode"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name string
		in   string
		want string // clean form, when wantReason is ""
		// wantReason is the reason of the errcode.Invalid error, or "".
		wantReason string
	}{
		{"plain", "a.txt", "a.txt", ""},
		{"dot slash", "./a.txt", "a.txt", ""},
		{"redundant separators", "a//b/./c/", "a/b/c", ""},
		{"dotdot inside", "a/b/../c", "a/c", ""},
		{"workspace itself", ".", ".", ""},
		{"dotdot back to root", "a/..", ".", ""},
		{"dotdot names are names", "..foo/bar..", "..foo/bar..", ""},
		{"three dots", "...", "...", ""},
		{"unicode", "é/日本.txt", "é/日本.txt", ""},
		{"space and punctuation", "a b/c-d_e+f=g,h;i'j\"k", "a b/c-d_e+f=g,h;i'j\"k", ""},
		{"backslash is a name byte", `a\..\..\b`, `a\..\..\b`, ""},
		{"workspace prefix", "/workspace", ".", ""},
		{"workspace prefix slash", "/workspace/", ".", ""},
		{"workspace absolute", "/workspace/notes/a.txt", "notes/a.txt", ""},
		{"workspace absolute unclean", "//workspace//notes/../b", "b", ""},
		{"workspace dotdot back in", "/workspace/../workspace/x", "x", ""},
		{"workspace named inside", "/workspace/workspace", "workspace", ""},
		{"max component", long(MaxComponentBytes), long(MaxComponentBytes), ""},
		{"max path", strings.Repeat("a/", MaxPathBytes/2-1) + "bb", strings.Repeat("a/", MaxPathBytes/2-1) + "bb", ""},
		{"long component removed by dotdot", long(300) + "/../a", "a", ""},

		{"empty", "", "", errcode.PathInvalid.String()},
		{"NUL", "a\x00b", "", errcode.PathInvalid.String()},
		{"NUL escape", "a\x00/../../etc", "", errcode.PathInvalid.String()},
		{"newline", "a\nb", "", errcode.PathInvalid.String()},
		{"carriage return", "a\rb", "", errcode.PathInvalid.String()},
		{"tab", "a\tb", "", errcode.PathInvalid.String()},
		{"escape", "\x1b[31m", "", errcode.PathInvalid.String()},
		{"DEL", "a\x7f", "", errcode.PathInvalid.String()},
		{"C1 NEL", "a\u0085b", "", errcode.PathInvalid.String()},
		{"C1 last", "\u009f", "", errcode.PathInvalid.String()},
		{"invalid UTF-8", "a\xffb", "", errcode.PathInvalid.String()},
		{"truncated UTF-8", "a\xc3", "", errcode.PathInvalid.String()},
		{"overlong UTF-8 slash", "a\xc0\xafb", "", errcode.PathInvalid.String()},
		{"dotdot", "..", "", errcode.PathEscapesWorkspace.String()},
		{"dotdot slash", "../", "", errcode.PathEscapesWorkspace.String()},
		{"dot dotdot", "./..", "", errcode.PathEscapesWorkspace.String()},
		{"climb", "../../../etc/passwd", "", errcode.PathEscapesWorkspace.String()},
		{"climb after descent", "a/../../x", "", errcode.PathEscapesWorkspace.String()},
		{"absolute host", "/etc/passwd", "", errcode.PathEscapesWorkspace.String()},
		{"absolute root", "/", "", errcode.PathEscapesWorkspace.String()},
		{"absolute double slash root", "//", "", errcode.PathEscapesWorkspace.String()},
		{"absolute prefix lookalike", "/workspacefoo/x", "", errcode.PathEscapesWorkspace.String()},
		{"absolute shorter prefix", "/work", "", errcode.PathEscapesWorkspace.String()},
		{"absolute leaves workspace", "/workspace/../etc/passwd", "", errcode.PathEscapesWorkspace.String()},
		{"absolute cleaned escape", "/workspace/a/../../etc", "", errcode.PathEscapesWorkspace.String()},
		{"path too long", long(MaxPathBytes + 1), "", errcode.PathTooLong.String()},
		{"5000 bytes", strings.Repeat("abcd/", 1000), "", errcode.PathTooLong.String()},
		{"10k deep", strings.Repeat("a/", 10000), "", errcode.PathTooLong.String()},
		{"component too long", long(MaxComponentBytes + 1), "", errcode.PathTooLong.String()},
		{"300 byte component", "a/" + long(300) + "/b", "", errcode.PathTooLong.String()},
		{"long component in workspace path", "/workspace/" + long(300), "", errcode.PathTooLong.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CleanPath(tt.in)
			if tt.wantReason == "" {
				if err != nil || got != tt.want {
					t.Fatalf("CleanPath(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
				}
				return
			}
			if code, reason := errcode.CodeOf(err), errcode.ReasonOf(err); code != errcode.Invalid || reason != tt.wantReason {
				t.Fatalf("CleanPath(%q) = %q, %v (%s/%s), want error %s/%s", tt.in, got, err, code, reason, errcode.Invalid, tt.wantReason)
			}
		})
	}
}

// FuzzCleanPath checks the invariants the agent relies on when it hands a
// cleaned path to its os.Root: whatever a client sends, an accepted path is
// relative, does not climb, carries no control characters and is short
// enough for the kernel.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{
		"a.txt", "./a/../b", "..", "../../../etc/passwd", "a/../../x", "/etc/passwd",
		"/workspace/notes/a.txt", "/workspace/../etc", "/workspacefoo", "a\x00/../../etc",
		"a\nb", "\u0085", "\xff", "é/日本", "..foo", "//workspace//x/..",
		strings.Repeat("a/", 2100), strings.Repeat("x", 256),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := CleanPath(in)
		if err != nil {
			switch r := errcode.ReasonOf(err); {
			case errcode.CodeOf(err) != errcode.Invalid:
				t.Fatalf("CleanPath(%q) error code = %s, want %s", in, errcode.CodeOf(err), errcode.Invalid)
			case r != errcode.PathInvalid.String() && r != errcode.PathEscapesWorkspace.String() && r != errcode.PathTooLong.String():
				t.Fatalf("CleanPath(%q) error reason = %q, want a path reason", in, r)
			}
			return
		}
		switch {
		case got == "":
			t.Fatalf("CleanPath(%q) = \"\", want a path (\".\" for the workspace)", in)
		case path.IsAbs(got):
			t.Fatalf("CleanPath(%q) = %q, want a relative path", in, got)
		case got == ".." || strings.HasPrefix(got, "../"):
			t.Fatalf("CleanPath(%q) = %q, want a path that does not climb", in, got)
		case path.Clean(got) != got:
			t.Fatalf("CleanPath(%q) = %q, not clean: path.Clean gives %q", in, got, path.Clean(got))
		case len(got) > MaxPathBytes:
			t.Fatalf("CleanPath(%q) = %d bytes, want at most %d", in, len(got), MaxPathBytes)
		case !utf8.ValidString(got):
			t.Fatalf("CleanPath(%q) = %q, want valid UTF-8", in, got)
		case strings.ContainsFunc(got, unicode.IsControl):
			t.Fatalf("CleanPath(%q) = %q, want no control characters", in, got)
		}
		for c := range strings.SplitSeq(got, "/") {
			if c == ".." || len(c) > MaxComponentBytes {
				t.Fatalf("CleanPath(%q) = %q, has component %q", in, got, c)
			}
		}
		if again, err := CleanPath(got); err != nil || again != got {
			t.Fatalf("CleanPath(CleanPath(%q)) = %q, %v, want %q (idempotent)", in, again, err, got)
		}
		if !strings.HasPrefix(in, "/") && got != path.Clean(in) {
			t.Fatalf("CleanPath(%q) = %q, want path.Clean's %q for a relative path", in, got, path.Clean(in))
		}
	})
}

// TestResolveBeneath checks the agent's own link resolution, used where
// the kernel does not confine os.Root (gVisor). Here the kernel does, so
// the positive control is that os.Root refuses the same escapes.
func TestResolveBeneath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{"sub/deep", "a"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"root": "/", "up": "..", "sub/up2": "../..", "in": "sub/deep", "sub/back": "../a",
		"chain": "a/b", "a/b": "../sub/up2", "loop1": "loop2", "loop2": "loop1", "dangling": "nothing",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(Config{Workspace: ws, StateDir: filepath.Join(dir, "state"), Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.rootConfines {
		t.Fatal("os.Root does not confine links on this kernel; the positive control needs one that does")
	}
	a.rootConfines = false // as under gVisor
	for _, tt := range []struct {
		in     string
		follow bool
		want   string // "" means path_escapes_workspace
	}{
		{"sub/deep/x", true, "sub/deep/x"},
		{"in/x", true, "sub/deep/x"},
		{"sub/back", true, "a"},
		{"sub/back", false, "sub/back"},
		{"dangling", true, "nothing"},
		{"root", false, "root"},
		{"root/etc/passwd", true, ""},
		{"root", true, ""},
		{"up/x", true, ""},
		{"sub/up2/x", true, ""},
		{"chain/x", true, ""},
		{"sub/../../x", true, ""},
	} {
		got, err := a.cleanPath(tt.in, tt.follow)
		switch {
		case tt.want == "" && errcode.ReasonOf(err) != errcode.PathEscapesWorkspace.String():
			t.Errorf("cleanPath(%q, %v) = %q, %v; want %s", tt.in, tt.follow, got, err, errcode.PathEscapesWorkspace.String())
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("cleanPath(%q, %v) = %q, %v; want %q", tt.in, tt.follow, got, err, tt.want)
		}
		// Positive control: the kernel-confined os.Root refuses the same.
		if tt.want == "" && tt.follow {
			if clean, err := CleanPath(tt.in); err == nil {
				if _, err := a.root.Stat(clean); err == nil {
					t.Errorf("os.Root.Stat(%q) succeeded: the escape case does not escape", tt.in)
				}
			}
		}
	}
	if _, err := a.cleanPath("loop1/x", true); errcode.ReasonOf(err) != errcode.PathIsSymlink.String() {
		t.Errorf("cleanPath(loop1/x) = %v, want %s", err, errcode.PathIsSymlink.String())
	}
}
