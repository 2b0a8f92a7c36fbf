package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// resolverCases are the two ways the file API resolves directories: every
// test below runs on both, so the walk (the fallback where openat2 is
// missing) is tested on kernels that have openat2.
var resolverCases = []struct {
	name     string
	walkOnly bool
}{
	{"openat2", false},
	{"walk", true},
}

// eachResolver runs f in a parallel subtest per resolver, on a fresh
// resolveTree.
func eachResolver(t *testing.T, f func(t *testing.T, w *wsRoot, ws, outside string)) {
	for _, rc := range resolverCases {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			ws, outside := resolveTree(t)
			f(t, newTestRoot(t, ws, rc.walkOnly), ws, outside)
		})
	}
}

// newTestRoot opens dir as a workspace, resolving by walk alone if
// walkOnly. Without openat2 the openat2 case skips, or fails under CI.
func newTestRoot(t *testing.T, dir string, walkOnly bool) *wsRoot {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := &wsRoot{fd: fd, walkOnly: walkOnly}
	t.Cleanup(func() { w.Close() })
	if !walkOnly {
		if d, err := w.beneath("."); errors.Is(err, errNoOpenat2) {
			if os.Getenv("CI") == "true" {
				t.Fatal("openat2 with RESOLVE_BENEATH is unavailable on this kernel")
			}
			t.Skip("openat2 with RESOLVE_BENEATH is unavailable on this kernel")
		} else if err == nil {
			d.Close()
		}
	}
	return w
}

// resolveTree makes a workspace (ws) beside an outside directory, with
// links that stay inside and links that lead out.
func resolveTree(t *testing.T) (ws, outside string) {
	t.Helper()
	top := t.TempDir()
	ws, outside = filepath.Join(top, "ws"), filepath.Join(top, "outside")
	for _, d := range []string{ws + "/sub/deeper", ws + "/a", ws + "/dir", outside + "/sub"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{ws + "/sub/real.txt", ws + "/file.txt", outside + "/secret"} {
		if err := os.WriteFile(f, []byte(filepath.Base(f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"in":        "sub",
		"self":      ".",
		"sub/back":  "../sub",
		"sub/top":   "..",
		"chain":     "a/b", // a/b -> e, a/e -> ../sub: chain is sub
		"a/b":       "e",
		"a/e":       "../sub",
		"infile":    "sub/real.txt",
		"up":        "..",
		"dir/link":  "../../",
		"abs":       "/",
		"absin":     ws + "/sub", // absolute, even though it is inside
		"relout":    "../outside",
		"reloutsub": "in/../../outside/sub",
		"loop1":     "loop2",
		"loop2":     "loop1",
		"dangling":  "nothing",
		"empty":     "sub/deeper/../../sub/deeper",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

// sameAs reports whether fd is the file at p.
func sameAs(t *testing.T, fd int, p string) bool {
	t.Helper()
	var got, want unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(p, &want); err != nil {
		t.Fatal(err)
	}
	return got.Dev == want.Dev && got.Ino == want.Ino
}

// resolveErr names the errors resolution gives, for comparison.
func resolveErr(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errEscapes):
		return "escapes"
	case errors.Is(err, unix.ELOOP):
		return "ELOOP"
	case errors.Is(err, unix.ENOENT):
		return "ENOENT"
	case errors.Is(err, unix.ENOTDIR):
		return "ENOTDIR"
	case errors.Is(err, unix.ENAMETOOLONG):
		return "ENAMETOOLONG"
	}
	return "error " + err.Error()
}

func TestResolveOpenDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want string // a directory relative to the workspace, or an error
	}{
		{".", "."},
		{"sub", "sub"},
		{"sub/", "sub"},
		{"sub/..", "."},
		{"in", "sub"},
		{"in/deeper/..", "sub"},
		{"in/..", "."}, // ".." of where the link leads, as the kernel does
		{"self/self/in", "sub"},
		{"chain", "sub"},
		{"a/e/deeper", "sub/deeper"},
		{"sub/back/back/deeper", "sub/deeper"},
		{"sub/top/in", "sub"},
		{"empty", "sub/deeper"},

		{"..", "escapes"},
		{"sub/../..", "escapes"},
		{"up", "escapes"},
		{"in/top/up", "escapes"},
		{"dir/link", "escapes"},
		{"abs", "escapes"},
		{"abs/etc", "escapes"},
		{"absin", "escapes"},
		{"relout", "escapes"},
		{"reloutsub", "escapes"},
		{"loop1", "ELOOP"},
		{"dangling", "ENOENT"},
		{"missing/x", "ENOENT"},
		{"file.txt", "ENOTDIR"},
		{"file.txt/x", "ENOTDIR"},
		{"infile", "ENOTDIR"},
	}
	eachResolver(t, func(t *testing.T, w *wsRoot, ws, _ string) {
		for _, tt := range tests {
			d, err := w.openDir(tt.path)
			got := resolveErr(err)
			if err == nil {
				if sameAs(t, d.fd, filepath.Join(ws, tt.want)) {
					got = tt.want
				} else {
					got = "another directory"
				}
				d.Close()
			}
			if got != tt.want {
				t.Errorf("openDir(%q) = %s, want %s", tt.path, got, tt.want)
			}
		}
	})
}

func TestResolveLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path   string
		follow bool
		want   string // the file the returned directory and name are, or an error
	}{
		{"sub/real.txt", true, "sub/real.txt"},
		{"infile", true, "sub/real.txt"},
		{"infile", false, "infile"},
		{"in/real.txt", false, "sub/real.txt"},
		{"in", true, "sub"},
		{"up", false, "up"}, // a link itself can be removed or moved
		{"abs", false, "abs"},
		{"sub/top", true, "."},
		{"dangling", false, "dangling"},
		{"dangling", true, "missing nothing"},
		{"missing", true, "missing missing"},

		{"up", true, "escapes"},
		{"abs", true, "escapes"},
		{"relout/secret", false, "escapes"},
		{"dir/link/x", false, "escapes"},
		{"loop1", true, "ELOOP"},
		{"loop1", false, "loop1"},
		{"file.txt/x", true, "ENOTDIR"},
	}
	eachResolver(t, func(t *testing.T, w *wsRoot, ws, _ string) {
		for _, tt := range tests {
			d, name, err := w.lookup(tt.path, tt.follow)
			got := resolveErr(err)
			if err == nil {
				got = describeAt(t, ws, d, name, tt.want)
				d.Close()
			}
			if got != tt.want {
				t.Errorf("lookup(%q, follow %v) = %s, want %s", tt.path, tt.follow, got, tt.want)
			}
		}
	})
}

// describeAt is want if name in d is the file want names in ws, "missing
// NAME" if name does not exist, or what it is instead.
func describeAt(t *testing.T, ws string, d *dir, name, want string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "missing " + name
	}
	var w unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, want), &w); err == nil && w.Dev == st.Dev && w.Ino == st.Ino {
		return want
	}
	return fmt.Sprintf("another file (%s in its directory)", name)
}

func TestResolveMkdirAll(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, w *wsRoot, ws, outside string) {
		for _, tt := range []struct{ path, want, made string }{
			{"new/a/b", "ok", "new/a/b"},
			{"in/made/here", "ok", "sub/made/here"},
			{"chain/x", "ok", "sub/x"},
			{"sub", "ok", "sub"},
			{"relout/x", "escapes", ""},
			{"abs/tmp/x", "escapes", ""},
			{"up/x", "escapes", ""},
			{"file.txt/x", "ENOTDIR", ""},
			{"dangling/x", "ENOENT", ""},
		} {
			d, err := w.mkdirAll(tt.path, 0o755)
			got := resolveErr(err)
			if err == nil {
				if !sameAs(t, d.fd, filepath.Join(ws, tt.made)) {
					got = "another directory"
				}
				d.Close()
			}
			if got != tt.want {
				t.Errorf("mkdirAll(%q) = %s, want %s", tt.path, got, tt.want)
			}
		}
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 2 {
			t.Errorf("outside after mkdirAll = %v, %v, want only secret and sub", entries, err)
		}
		if _, err := os.Lstat(filepath.Join(ws, "nothing")); err == nil {
			t.Errorf("mkdirAll(dangling/x) made the dangling link's target")
		}
	})
}

func TestResolveRemoveAll(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, w *wsRoot, ws, outside string) {
		// A tree holding links to the outside and to the workspace.
		tree := filepath.Join(ws, "tree")
		for _, p := range []string{"tree/x/y", "tree/z"} {
			if err := os.MkdirAll(filepath.Join(ws, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for link, target := range map[string]string{"tree/out": outside, "tree/x/relout": "../../../outside", "tree/z/in": "../../sub"} {
			if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
				t.Fatal(err)
			}
		}
		// Control: through the links, the outside and sub are reachable.
		if _, err := os.Stat(filepath.Join(tree, "out/secret")); err != nil {
			t.Fatalf("control: %v", err)
		}
		d, err := w.openDir(".")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.removeAll("tree"); err != nil {
			t.Fatalf("removeAll(tree) = %v", err)
		}
		for _, p := range []string{tree} {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s after removeAll: %v, want gone", p, err)
			}
		}
		for _, p := range []string{filepath.Join(outside, "secret"), filepath.Join(ws, "sub/real.txt")} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s after removeAll: %v, want it kept", p, err)
			}
		}
	})
}

// TestResolveSwapRace swaps a directory with a link that leads out (one
// absolute, one relative through "..") while resolving through it: every
// answer is the directory inside or a refusal. The control counts both
// answers, so the swap did race the resolution.
func TestResolveSwapRace(t *testing.T) {
	t.Parallel()
	for _, rc := range resolverCases {
		for _, target := range []string{"abs", "rel"} {
			t.Run(rc.name+" "+target, func(t *testing.T) {
				t.Parallel()
				ws, outside := resolveTree(t)
				w := newTestRoot(t, ws, rc.walkOnly)
				if err := os.MkdirAll(filepath.Join(ws, "race/dir/in"), 0o755); err != nil {
					t.Fatal(err)
				}
				link := outside + "/sub"
				if target == "rel" {
					link = "../../outside/sub"
				}
				if err := os.Symlink(link, filepath.Join(ws, "race/link")); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(outside, "sub/in"), 0o755); err != nil {
					t.Fatal(err)
				}
				inside := filepath.Join(ws, "race/dir/in")
				var st unix.Stat_t
				if err := unix.Stat(inside, &st); err != nil {
					t.Fatal(err)
				}
				race, err := unix.Open(filepath.Join(ws, "race"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(race)

				const swaps = 20000
				var wg sync.WaitGroup
				stop := make(chan struct{})
				var swapErr error
				wg.Go(func() {
					for range swaps {
						select {
						case <-stop:
							return
						default:
						}
						if err := unix.Renameat2(race, "dir", race, "link", unix.RENAME_EXCHANGE); err != nil {
							swapErr = err
							return
						}
					}
				})
				got := map[string]int{}
				for i := 0; i < 100000 && got["ok"]+got["escapes"] < 4000; i++ {
					d, err := w.openDir("race/dir/in/../in")
					outcome := resolveErr(err)
					if err == nil {
						var dst unix.Stat_t
						if err := unix.Fstat(d.fd, &dst); err != nil || dst.Ino != st.Ino || dst.Dev != st.Dev {
							outcome = "ANOTHER DIRECTORY (outside?)"
						}
						d.Close()
					}
					got[outcome]++
				}
				close(stop)
				wg.Wait()
				if swapErr != nil {
					t.Fatalf("swapping: %v", swapErr)
				}
				for o, n := range got {
					if o != "ok" && o != "escapes" {
						t.Errorf("openDir during the swaps = %s %d times, want only ok or escapes", o, n)
					}
				}
				if got["ok"] == 0 || got["escapes"] == 0 {
					t.Errorf("control: openDir outcomes = %v, want both ok and escapes (the swap raced)", got)
				}
				if entries, err := os.ReadDir(filepath.Join(outside, "sub")); err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "in") {
					t.Errorf("outside/sub = %v, %v, want it unchanged", entries, err)
				}
			})
		}
	}
}
