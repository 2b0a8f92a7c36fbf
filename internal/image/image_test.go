package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berthdev/berth/internal/errcode"
)

// ent is one entry of a test layer.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
}

func file(name, body string) ent {
	return ent{name: name, body: body, typ: tar.TypeReg, mode: 0o644}
}

func dir(name string) ent {
	return ent{name: name, typ: tar.TypeDir, mode: 0o755}
}

func symlink(name, target string) ent {
	return ent{name: name, link: target, typ: tar.TypeSymlink, mode: 0o777}
}

func hardlink(name, target string) ent {
	return ent{name: name, link: target, typ: tar.TypeLink, mode: 0o644}
}

var mtime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

var testConfig = v1.ImageConfig{
	Env: []string{"PATH=/usr/bin"}, Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", "true"},
	WorkingDir: "/work", User: "1000:1000",
}

// layerTar returns an uncompressed layer of ents, owned by 1000:1000.
func layerTar(t testing.TB, ents ...ent) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: e.mode,
			Size: int64(len(e.body)), ModTime: mtime, Uid: 1000, Gid: 1000}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compress compresses layer i of an image with gzip, nothing or zstd, in
// turn, so that every decoder gets exercised.
func compress(i int, data []byte) (mediaType string, blob []byte) {
	var buf bytes.Buffer
	switch i % 3 {
	case 0:
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
		return v1.MediaTypeImageLayerGzip, buf.Bytes()
	case 1:
		return v1.MediaTypeImageLayer, data
	}
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(data)
	zw.Close()
	return v1.MediaTypeImageLayerZstd, buf.Bytes()
}

// layout builds an OCI image layout in a temporary directory.
type layout struct {
	t     testing.TB
	dir   string
	index v1.Index
}

func newLayout(t testing.TB) *layout {
	l := &layout{t: t, dir: t.TempDir(), index: v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageIndex}}
	l.write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	return l
}

func (l *layout) write(name string, data []byte) {
	p := filepath.Join(l.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *layout) blob(mediaType string, data []byte) v1.Descriptor {
	d := digest.FromBytes(data)
	l.write("blobs/sha256/"+d.Encoded(), data)
	return v1.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

func (l *layout) json(mediaType string, v any) v1.Descriptor {
	data, err := json.Marshal(v)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.blob(mediaType, data)
}

// image writes an image for linux/arch made of the given uncompressed
// layers, and returns its manifest.
func (l *layout) image(arch string, layers ...[]byte) (v1.Descriptor, v1.Manifest) {
	img := v1.Image{Platform: v1.Platform{OS: "linux", Architecture: arch}, Config: testConfig, RootFS: v1.RootFS{Type: "layers"}}
	m := v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageManifest}
	for i, data := range layers {
		img.RootFS.DiffIDs = append(img.RootFS.DiffIDs, digest.FromBytes(data))
		m.Layers = append(m.Layers, l.blob(compress(i, data)))
	}
	m.Config = l.json(v1.MediaTypeImageConfig, img)
	d := l.json(v1.MediaTypeImageManifest, m)
	d.Platform = &img.Platform
	return d, m
}

// add lists d in index.json, named ref unless it is empty.
func (l *layout) add(d v1.Descriptor, ref string) {
	if ref != "" {
		d.Annotations = map[string]string{v1.AnnotationRefName: ref}
	}
	l.index.Manifests = append(l.index.Manifests, d)
	data, _ := json.Marshal(l.index)
	l.write("index.json", data)
}

// archive returns a tar of dir.
func archive(t testing.TB, dir string) string {
	name := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// legacyImage is an image in a legacy docker save.
type legacyImage struct {
	tags   []string
	layers [][]byte // uncompressed
	gzip   bool     // whether layer.tar files are gzipped
}

// dockerSave writes a legacy docker save tarball of images and returns its
// path and the images' IDs.
func dockerSave(t *testing.T, images ...legacyImage) (string, []digest.Digest) {
	l := &layout{t: t, dir: t.TempDir()}
	var manifest []dockerManifest
	var ids []digest.Digest
	for _, im := range images {
		img := v1.Image{Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, Config: testConfig, RootFS: v1.RootFS{Type: "layers"}}
		var paths []string
		for _, data := range im.layers {
			diffID := digest.FromBytes(data)
			img.RootFS.DiffIDs = append(img.RootFS.DiffIDs, diffID)
			if im.gzip {
				_, data = compress(0, data)
			}
			paths = append(paths, diffID.Encoded()+"/layer.tar")
			l.write(paths[len(paths)-1], data)
		}
		cfg, _ := json.Marshal(img)
		ids = append(ids, digest.FromBytes(cfg))
		l.write(ids[len(ids)-1].Encoded()+".json", cfg)
		manifest = append(manifest, dockerManifest{Config: ids[len(ids)-1].Encoded() + ".json", RepoTags: im.tags, Layers: paths})
	}
	data, _ := json.Marshal(manifest)
	l.write("manifest.json", data)
	l.write("repositories", []byte(`{}`))
	return archive(t, l.dir), ids
}

// unpack unpacks src into a new directory dst, in a directory of its own.
func unpack(t *testing.T, src string, opts Options) (string, *Config, error) {
	dst := filepath.Join(t.TempDir(), "dst")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, err := Unpack(context.Background(), src, dst, opts)
	return dst, cfg, err
}

func checkErr(t *testing.T, err error, code errcode.Code, reason string) {
	t.Helper()
	if errcode.CodeOf(err) != code || errcode.ReasonOf(err) != reason {
		t.Fatalf("Unpack() error = %v, want code %q, reason %q", err, code, reason)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree describes each path under dir by its mode and, for a file, its
// content or, for a symlink, its target.
func tree(t *testing.T, dir string) map[string]string {
	got := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		if fi.Mode().IsRegular() {
			desc += " " + readFile(t, p)
		} else if target, err := os.Readlink(p); err == nil {
			desc += " -> " + target
		}
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestUnpack(t *testing.T) {
	t.Parallel()
	l := newLayout(t)
	d, _ := l.image(runtime.GOARCH,
		layerTar(t,
			dir("etc"), ent{name: "etc/keep", body: "keep", typ: tar.TypeReg, mode: 0o640}, file("etc/gone", "gone"),
			dir("old"), file("old/a", "a"),
			dir("opq"), file("opq/lower", "lower"), dir("opq/sub"), file("opq/sub/lower", "lower"),
			ent{name: "bin/su", body: "su", typ: tar.TypeReg, mode: 0o6755},
			ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
			dir("swap"), file("swap/child", "c"), file("swap2", "file"),
			ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, ent{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
		),
		layerTar(t,
			// Same-layer entries come before the opaque marker: they stay.
			file("./opq/new", "new"), dir("opq/sub"), file("opq/sub/new", "new"), file("opq/.wh..wh..opq", ""),
			file("etc/.wh.gone", ""), file(".wh.old", ""), file("etc/late", "late"), file("etc/.wh.late", ""),
			symlink("link", "/etc/keep"), hardlink("hard", "etc/keep"),
			file("swap", "file now"), dir("swap2"), file("swap2/child", "c"),
		),
		layerTar(t, file("etc/zstd", "z")),
	)
	l.add(d, "")
	want := map[string]string{
		"bin":         "drwxr-xr-x",
		"bin/su":      "-rwxr-xr-x su",
		"etc":         "drwxr-xr-x",
		"etc/keep":    "-rw-r----- keep",
		"etc/late":    "-rw-r--r-- late",
		"etc/zstd":    "-rw-r--r-- z",
		"hard":        "-rw-r----- keep",
		"link":        "Lrwxrwxrwx -> /etc/keep",
		"opq":         "drwxr-xr-x",
		"opq/new":     "-rw-r--r-- new",
		"opq/sub":     "drwxr-xr-x",
		"opq/sub/new": "-rw-r--r-- new",
		"swap":        "-rw-r--r-- file now",
		"swap2":       "drwxr-xr-x",
		"swap2/child": "-rw-r--r-- c",
		"tmp":         "dtrwxrwxrwx",
	}
	for name, src := range map[string]string{"layout": l.dir, "archive": archive(t, l.dir)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst, cfg, err := unpack(t, src, Options{})
			if err != nil {
				t.Fatalf("Unpack() error = %v", err)
			}
			if diff := cmp.Diff(want, tree(t, dst)); diff != "" {
				t.Errorf("unpacked tree (-want +got):\n%s", diff)
			}
			wantCfg := &Config{Env: testConfig.Env, Entrypoint: testConfig.Entrypoint, Cmd: testConfig.Cmd, WorkingDir: "/work", User: "1000:1000"}
			if diff := cmp.Diff(wantCfg, cfg); diff != "" {
				t.Errorf("Unpack() config (-want +got):\n%s", diff)
			}
			for _, name := range []string{"etc", "etc/keep"} {
				fi, err := os.Stat(filepath.Join(dst, name))
				if err != nil || !fi.ModTime().Equal(mtime) {
					t.Errorf("mtime of %s = %v (%v), want %v", name, fi.ModTime(), err, mtime)
				}
			}
			keep, _ := os.Stat(filepath.Join(dst, "etc/keep"))
			if hard, _ := os.Stat(filepath.Join(dst, "hard")); !os.SameFile(keep, hard) {
				t.Errorf("hard is not a hard link to etc/keep")
			}
			if st := keep.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (st.Uid != 0 || st.Gid != 0) {
				t.Errorf("etc/keep owned by %d:%d, want 0:0", st.Uid, st.Gid)
			}
		})
	}
}

func TestUnpackDockerSave(t *testing.T) {
	t.Parallel()
	src, ids := dockerSave(t,
		legacyImage{tags: []string{"app:1"}, layers: [][]byte{layerTar(t, file("v", "1"))}},
		legacyImage{tags: []string{"app:2", "app:latest"}, layers: [][]byte{layerTar(t, dir("d")), layerTar(t, file("d/v", "2"))}, gzip: true},
	)
	tests := []struct {
		ref, file, want string
		code            errcode.Code
		reason          string
	}{
		{ref: "app:1", file: "v", want: "1"},
		{ref: "latest", file: "d/v", want: "2"},
		{ref: "docker.io/library/app:2", file: "d/v", want: "2"},
		{ref: ids[0].String(), file: "v", want: "1"},
		{ref: "", code: errcode.Invalid, reason: "image_ambiguous"},
		{ref: "app:3", code: errcode.NotFound, reason: "image_not_found"},
	}
	for _, tt := range tests {
		name := tt.ref
		if name == "" {
			name = "no ref"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst, _, err := unpack(t, src, Options{Ref: tt.ref})
			checkErr(t, err, tt.code, tt.reason)
			if tt.file != "" {
				if got := readFile(t, filepath.Join(dst, tt.file)); got != tt.want {
					t.Errorf("%s = %q, want %q", tt.file, got, tt.want)
				}
			}
		})
	}
}

func TestUnpackSelect(t *testing.T) {
	t.Parallel()
	multi := newLayout(t)
	one, _ := multi.image(runtime.GOARCH, layerTar(t, file("name", "one")))
	two, _ := multi.image(runtime.GOARCH, layerTar(t, file("name", "two")))
	multi.add(one, "app:one")
	multi.add(two, "two")

	// An image index for two platforms, with an attestation manifest as
	// docker buildx writes them.
	other := "s390x"
	if runtime.GOARCH == other {
		other = "ppc64le"
	}
	platforms := newLayout(t)
	host, _ := platforms.image(runtime.GOARCH, layerTar(t, file("name", runtime.GOARCH)))
	foreign, _ := platforms.image(other, layerTar(t, file("name", other)))
	attestation := v1.Descriptor{MediaType: v1.MediaTypeImageManifest, Digest: digest.FromString("attestation"), Size: 11,
		Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}
	platforms.add(platforms.json(v1.MediaTypeImageIndex, v1.Index{Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageIndex, Manifests: []v1.Descriptor{foreign, attestation, host}}), "multi")

	twice := newLayout(t)
	d, _ := twice.image(runtime.GOARCH, layerTar(t, file("name", "twice")))
	twice.add(d, "app:1")
	twice.add(d, "app:latest")

	foreignOnly := newLayout(t)
	foreign, _ = foreignOnly.image(other, layerTar(t, file("name", other)))
	foreignOnly.add(foreign, "")

	tests := []struct {
		name   string
		src    string
		opts   Options
		want   string
		code   errcode.Code
		reason string
	}{
		{name: "full ref", src: multi.dir, opts: Options{Ref: "app:one"}, want: "one"},
		{name: "tag of ref", src: multi.dir, opts: Options{Ref: "one"}, want: "one"},
		{name: "bare tag", src: multi.dir, opts: Options{Ref: "app:two"}, want: "two"},
		{name: "digest", src: multi.dir, opts: Options{Ref: two.Digest.String()}, want: "two"},
		{name: "ambiguous", src: multi.dir, code: errcode.Invalid, reason: "image_ambiguous"},
		{name: "tagged twice", src: twice.dir, want: "twice"},
		{name: "not found", src: multi.dir, opts: Options{Ref: "three"}, code: errcode.NotFound, reason: "image_not_found"},
		{name: "host platform", src: platforms.dir, want: runtime.GOARCH},
		{name: "other platform", src: platforms.dir, opts: Options{Ref: "multi", Arch: other}, want: other},
		{name: "missing platform", src: platforms.dir, opts: Options{Arch: "riscv64"}, code: errcode.NotFound, reason: "image_not_found"},
		{name: "platform mismatch", src: foreignOnly.dir, code: errcode.Invalid, reason: "image_platform_mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dst, _, err := unpack(t, tt.src, tt.opts)
			checkErr(t, err, tt.code, tt.reason)
			if tt.want != "" {
				if got := readFile(t, filepath.Join(dst, "name")); got != tt.want {
					t.Errorf("name = %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestUnpackCorrupt(t *testing.T) {
	t.Parallel()
	// Each corrupts a good image in place.
	tests := []struct {
		name    string
		corrupt func(l *layout, m v1.Manifest)
	}{
		{"layer byte flipped", func(l *layout, m v1.Manifest) {
			l.edit(m.Layers[0], func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
		}},
		{"layer byte added", func(l *layout, m v1.Manifest) { l.edit(m.Layers[1], func(b []byte) []byte { return append(b, 0) }) }},
		{"config byte flipped", func(l *layout, m v1.Manifest) { l.edit(m.Config, func(b []byte) []byte { b[0] = ' '; return b }) }},
		{"diff ID wrong", func(l *layout, m v1.Manifest) {
			var img v1.Image
			json.Unmarshal(l.read(m.Config), &img)
			img.RootFS.DiffIDs[1] = digest.FromString("something else")
			m.Config = l.json(v1.MediaTypeImageConfig, img)
			l.index.Manifests = nil
			l.add(l.json(v1.MediaTypeImageManifest, m), "")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLayout(t)
			d, m := l.image(runtime.GOARCH, layerTar(t, file("a", "a")), layerTar(t, file("b", "b")))
			l.add(d, "")
			if _, _, err := unpack(t, l.dir, Options{}); err != nil {
				t.Fatalf("Unpack() before corruption: %v", err)
			}
			tt.corrupt(l, m)
			_, _, err := unpack(t, l.dir, Options{})
			checkErr(t, err, errcode.Invalid, "blob_digest_mismatch")
		})
	}
}

func (l *layout) read(d v1.Descriptor) []byte {
	b, err := os.ReadFile(filepath.Join(l.dir, "blobs/sha256", d.Digest.Encoded()))
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

func (l *layout) edit(d v1.Descriptor, f func([]byte) []byte) {
	l.write("blobs/sha256/"+d.Digest.Encoded(), f(l.read(d)))
}

func TestUnpackMaxBytes(t *testing.T) {
	t.Parallel()
	l := newLayout(t)
	d, _ := l.image(runtime.GOARCH, layerTar(t, file("a", strings.Repeat("a", 60))), layerTar(t, file("b", strings.Repeat("b", 40))))
	l.add(d, "")
	if _, _, err := unpack(t, l.dir, Options{MaxBytes: 100}); err != nil {
		t.Fatalf("Unpack(MaxBytes: 100) error = %v", err)
	}
	_, _, err := unpack(t, l.dir, Options{MaxBytes: 99})
	checkErr(t, err, errcode.PayloadTooLarge, "image_too_large")
}

// outsider sets up the probe of the unsafe-layer tests: dst inside base,
// next to base/secret. It returns base, dst and a check that nothing
// outside dst was created, removed, changed or linked to from inside.
func outsider(t *testing.T) (base, dst string, check func()) {
	base = t.TempDir()
	dst = filepath.Join(base, "dst")
	secret := filepath.Join(base, "secret")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return base, dst, func() {
		t.Helper()
		entries, _ := os.ReadDir(base)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"dst", "secret"}) {
			t.Errorf("outside dst: %v, want [dst secret]", names)
		}
		if got := readFile(t, secret); got != "secret" {
			t.Errorf("secret = %q", got)
		}
		s, _ := os.Stat(secret)
		for name, desc := range tree(t, dst) {
			if fi, err := os.Stat(filepath.Join(dst, name)); err == nil && strings.HasPrefix(desc, "-") && os.SameFile(fi, s) {
				t.Errorf("%s is a hard link to secret", name)
			}
		}
	}
}

func TestUnpackUnsafe(t *testing.T) {
	t.Parallel()
	lower := []ent{dir("d"), file("d/f", "f"), file("inside", "i")}
	tests := []struct {
		name string
		// evil is the upper layer of an image; it must fail with
		// "unsafe_path" (or succeed, if safe is set) leaving outside dst
		// untouched.
		evil func(base string) []ent
		safe bool
		// benign uses the same mechanism inside dst: it must work, and
		// check proves it did, so a refusal of evil is not an accident.
		benign func(base string) []ent
		check  func(t *testing.T, base, dst string)
	}{{
		name:   "dotdot",
		evil:   func(string) []ent { return []ent{file("d/../../escape", "x")} },
		benign: func(string) []ent { return []ent{file("d/./escape", "x")} },
		check:  func(t *testing.T, base, dst string) { readFile(t, filepath.Join(dst, "d/escape")) },
	}, {
		name:   "absolute name",
		evil:   func(base string) []ent { return []ent{file(filepath.Join(base, "abs"), "x")} },
		safe:   true,
		benign: func(string) []ent { return []ent{file("/abs", "x")} },
		check:  func(t *testing.T, base, dst string) { readFile(t, filepath.Join(dst, "abs")) },
	}, {
		name:   "write through symlink",
		evil:   func(base string) []ent { return []ent{symlink("evil", base), file("evil/pwned", "x")} },
		benign: func(base string) []ent { return []ent{symlink("evil", base), dir("real"), file("real/pwned", "x")} },
		check: func(t *testing.T, base, dst string) {
			// The link is created as is, and writing through it escapes.
			if err := os.WriteFile(filepath.Join(dst, "evil", "pwned"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			readFile(t, filepath.Join(base, "pwned"))
			readFile(t, filepath.Join(dst, "real/pwned"))
		},
	}, {
		name:   "write through inner symlink",
		evil:   func(string) []ent { return []ent{symlink("s", "../.."), file("s/pwned", "x")} },
		benign: func(string) []ent { return []ent{symlink("s", "d"), file("d/pwned", "x")} },
		check:  func(t *testing.T, base, dst string) { readFile(t, filepath.Join(dst, "s/pwned")) },
	}, {
		name:   "hardlink dotdot",
		evil:   func(string) []ent { return []ent{hardlink("hl", "../../secret")} },
		benign: func(string) []ent { return []ent{hardlink("hl", "d/f")} },
		check:  checkHardlink,
	}, {
		name:   "hardlink through symlink",
		evil:   func(base string) []ent { return []ent{symlink("s", base), hardlink("hl", "s/secret")} },
		benign: func(string) []ent { return []ent{symlink("s", "d"), hardlink("hl", "d/f")} },
		check:  checkHardlink,
	}, {
		name: "hardlink to symlink",
		evil: func(base string) []ent {
			return []ent{symlink("s", filepath.Join(base, "secret")), hardlink("hl", "s")}
		},
		benign: func(string) []ent { return []ent{symlink("s", "d/f"), hardlink("hl", "d/f")} },
		check:  checkHardlink,
	}, {
		name:   "whiteout dotdot",
		evil:   func(string) []ent { return []ent{file("../.wh.secret", "")} },
		benign: func(string) []ent { return []ent{file(".wh.inside", "")} },
		check:  checkGone("inside"),
	}, {
		name:   "whiteout of parent",
		evil:   func(string) []ent { return []ent{file("d/.wh...", "")} },
		benign: func(string) []ent { return []ent{file("d/.wh.f", "")} },
		check:  checkGone("d/f"),
	}, {
		name:   "whiteout through symlink",
		evil:   func(base string) []ent { return []ent{symlink("s", base), file("s/.wh.secret", "")} },
		benign: func(string) []ent { return []ent{symlink("s", "d"), file("d/.wh.f", "")} },
		check:  checkGone("d/f"),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := func(upper func(string) []ent) (base, dst string, check func(), err error) {
				l := newLayout(t)
				base, dst, check = outsider(t)
				d, _ := l.image(runtime.GOARCH, layerTar(t, lower...), layerTar(t, upper(base)...))
				l.add(d, "")
				_, err = Unpack(context.Background(), l.dir, dst, Options{})
				return base, dst, check, err
			}
			base, dst, _, err := run(tt.benign)
			if err != nil {
				t.Fatalf("benign: Unpack() error = %v", err)
			}
			tt.check(t, base, dst)

			base, dst, check, err := run(tt.evil)
			check()
			if !tt.safe {
				checkErr(t, err, errcode.Invalid, "unsafe_path")
				return
			}
			if err != nil {
				t.Fatalf("Unpack() error = %v", err)
			}
			readFile(t, filepath.Join(dst, base, "abs"))
		})
	}
}

func checkHardlink(t *testing.T, base, dst string) {
	f, _ := os.Stat(filepath.Join(dst, "d/f"))
	if hl, err := os.Stat(filepath.Join(dst, "hl")); err != nil || !os.SameFile(f, hl) {
		t.Errorf("hl is not a hard link to d/f (%v)", err)
	}
}

func checkGone(name string) func(t *testing.T, base, dst string) {
	return func(t *testing.T, base, dst string) {
		if _, err := os.Lstat(filepath.Join(dst, name)); !os.IsNotExist(err) {
			t.Errorf("%s not whited out: %v", name, err)
		}
	}
}

// FuzzUnpack applies arbitrary layers: whatever they hold, Unpack must not
// panic or touch anything outside dst.
func FuzzUnpack(f *testing.F) {
	f.Add(layerTar(f, dir("a"), file("a/b", "b"), symlink("c", "/"), hardlink("d", "a/b"), file("a/.wh..wh..opq", "")))
	f.Add(layerTar(f, symlink("evil", ".."), file("evil/x", "x"), file("../y", "y")))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := newLayout(t)
		_, dst, check := outsider(t)
		m := v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageManifest,
			Layers: []v1.Descriptor{l.blob(v1.MediaTypeImageLayer, data)}}
		m.Config = l.json(v1.MediaTypeImageConfig, v1.Image{RootFS: v1.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(data)}}})
		l.add(l.json(v1.MediaTypeImageManifest, m), "")
		Unpack(context.Background(), l.dir, dst, Options{MaxBytes: 1 << 20})
		check()
	})
}

// TestUnpackMountPoints: an image whose mount points (after all its
// layers) are not real directories is refused, naming the path; the
// controls, with real directories, none at all, or links elsewhere, unpack,
// and without MountPoints the same hostile layers unpack too, so the
// refusal is the check's and not the applier's.
func TestUnpackMountPoints(t *testing.T) {
	t.Parallel()
	points := []string{"proc", "sys", "dev", "tmp", "run", "etc", "x/y"}
	tests := []struct {
		name   string
		layers [][]ent
		bad    string // the path named; "" for an image that unpacks
	}{
		{"proc to an absolute path", [][]ent{{symlink("proc", "/x")}}, "/proc"},
		{"proc to sys", [][]ent{{dir("sys"), symlink("proc", "sys")}}, "/proc"},
		{"proc to sys, relative with dots", [][]ent{{dir("sys"), symlink("proc", "./sys/../sys")}}, "/proc"},
		{"dev a file", [][]ent{{file("dev", "not a directory")}}, "/dev"},
		{"etc a link", [][]ent{{dir("usr/etc"), symlink("etc", "usr/etc")}}, "/etc"},
		{"later layer replaces a directory with a link", [][]ent{{dir("tmp"), file("tmp/f", "f")}, {symlink("tmp", "/var/tmp")}}, "/tmp"},
		{"whiteout then a link", [][]ent{{dir("run")}, {file(".wh.run", "")}, {symlink("run", "/x")}}, "/run"},
		{"whiteout and a link in one layer", [][]ent{{dir("sys")}, {file(".wh.sys", ""), symlink("sys", "proc")}}, "/sys"},
		{"parent a link", [][]ent{{dir("d/y"), symlink("x", "d")}}, "/x"},
		{"nested a link", [][]ent{{dir("x"), symlink("x/y", "/")}}, "/x/y"},

		{"control: real directories", [][]ent{{dir("proc"), dir("sys"), dir("dev"), dir("tmp"), dir("x/y"), file("etc/hosts", "h")}}, ""},
		{"control: none at all", [][]ent{{file("bin/sh", "sh")}}, ""},
		{"control: links elsewhere", [][]ent{{dir("usr/bin"), symlink("bin", "usr/bin"), dir("var"), symlink("var/run", "/run"), symlink("procs", "/proc")}}, ""},
		{"control: later layer replaces a link with a directory", [][]ent{{symlink("proc", "/x")}, {dir("proc")}}, ""},
		{"control: a link whited out", [][]ent{{symlink("dev", "/x")}, {file(".wh.dev", "")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLayout(t)
			var layers [][]byte
			for _, ents := range tt.layers {
				layers = append(layers, layerTar(t, ents...))
			}
			d, _ := l.image(runtime.GOARCH, layers...)
			l.add(d, "")
			dst, _, err := unpack(t, l.dir, Options{MountPoints: points})
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("Unpack() error = %v, want nil", err)
				}
				for _, p := range points {
					if fi, err := os.Lstat(filepath.Join(dst, p)); err == nil && !fi.IsDir() {
						t.Errorf("Unpack() left %s a %s", p, fi.Mode().Type())
					}
				}
				return
			}
			checkErr(t, err, errcode.Invalid, "image_mount_point_invalid")
			if !strings.Contains(err.Error(), "image's "+tt.bad+" is") {
				t.Errorf("Unpack() error = %v, want it to name %s", err, tt.bad)
			}
			// The same image without the check unpacks, as it did before.
			if _, _, err := unpack(t, l.dir, Options{}); err != nil {
				t.Errorf("Unpack() without MountPoints error = %v, want nil", err)
			}
		})
	}
}
