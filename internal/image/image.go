package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"syscall"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berthdev/berth/internal/errcode"
)

// Config is what Berth keeps of an image's configuration.
type Config struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Options says which image to unpack and how much of it to accept.
type Options struct {
	// Ref selects the image: a tag ("name:tag" or "tag"), matched against
	// the org.opencontainers.image.ref.name annotation or docker's RepoTags,
	// or a "sha256:..." digest of a manifest or index listed in index.json
	// (the image ID, that is the config digest, for a legacy docker save).
	// Empty selects the only image, and is an error if there are several.
	Ref string
	// MaxBytes bounds the total size of regular file content; 0 means 8 GiB.
	MaxBytes int64
	// Arch is the architecture to pick from an image index; the OS is
	// always linux. Empty means runtime.GOARCH.
	Arch string
	// MountPoints are paths (relative to the image root) the caller
	// mounts over or writes into, such as "proc" and "dev". Once every
	// layer is applied, each must be a real directory or absent, and so
	// must each of its parents: a runtime that mounts procfs at a /proc
	// that is a symlink mounts it wherever the link points. Unpack fails
	// with "image_mount_point_invalid" otherwise.
	MountPoints []string
}

const (
	defaultMaxBytes = 8 << 30
	maxJSONBytes    = 4 << 20   // manifests, indexes and configs
	maxEntries      = 1_000_000 // tar entries, over all layers
	maxNameBytes    = 4096      // entry names and link targets
	maxIndexDepth   = 4         // image indexes nested in index.json

	containerdNameAnnotation = "io.containerd.image.name"
	mediaTypeDockerManifest  = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerList      = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// layer is one layer blob to apply.
type layer struct {
	name string // path inside the source
	// desc is the blob's descriptor, or nil for a legacy docker layer.tar,
	// which only the diff ID vouches for.
	desc   *v1.Descriptor
	diffID digest.Digest // digest of the uncompressed tar
}

// Unpack reads src, an OCI image layout directory, a tar of one, or a
// `docker save` tarball, and applies the layers of the image opts selects, in
// order, to dst, which must be an existing empty directory. It returns the
// image's configuration.
//
// Unpack checks ctx between tar entries. On error, including cancellation,
// dst is left as far as Unpack got: callers unpack into a temporary
// directory and rename it into place on success. Unpack is safe to call
// concurrently for different destinations.
func Unpack(ctx context.Context, src, dst string, opts Options) (*Config, error) {
	if opts.MaxBytes == 0 {
		opts.MaxBytes = defaultMaxBytes
	}
	if opts.Arch == "" {
		opts.Arch = runtime.GOARCH
	}
	s, err := openSource(src)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	img, layers, err := resolve(s, opts)
	if err != nil {
		return nil, err
	}

	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("opening destination: %w", err)
	}
	defer root.Close()
	a, err := newApplier(root, opts.MaxBytes)
	if err != nil {
		return nil, err
	}
	for i, l := range layers {
		if err := a.apply(ctx, s, l); err != nil {
			return nil, fmt.Errorf("applying layer %d of %d: %w", i+1, len(layers), err)
		}
	}
	if err := a.finish(); err != nil {
		return nil, err
	}
	if err := CheckMountPoints(root, opts.MountPoints, "the image's"); err != nil {
		return nil, err
	}
	c := img.Config
	return &Config{Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir, User: c.User}, nil
}

// resolve finds the image opts selects and returns its config and layers.
func resolve(s source, opts Options) (*v1.Image, []layer, error) {
	var idx v1.Index
	err := readJSON(s, "index.json", nil, &idx)
	if errors.Is(err, fs.ErrNotExist) {
		return resolveDocker(s, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := pick(idx.Manifests, opts.Ref, opts.Arch, true)
	for depth := 0; err == nil && isIndex(d.MediaType); depth++ {
		if depth == maxIndexDepth {
			return nil, nil, errcode.ImageInvalid.New("image indexes nested more than %d deep", maxIndexDepth)
		}
		var sub v1.Index
		if err := readJSON(s, "", &d, &sub); err != nil {
			return nil, nil, err
		}
		d, err = pick(sub.Manifests, "", opts.Arch, false)
	}
	if err != nil {
		return nil, nil, err
	}
	if d.MediaType != v1.MediaTypeImageManifest && d.MediaType != mediaTypeDockerManifest {
		return nil, nil, errcode.ImageInvalid.New("%s has media type %q, not an image manifest", d.Digest, d.MediaType)
	}
	var m v1.Manifest
	if err := readJSON(s, "", &d, &m); err != nil {
		return nil, nil, err
	}
	var img v1.Image
	if err := readJSON(s, "", &m.Config, &img); err != nil {
		return nil, nil, err
	}
	layers := make([]layer, len(m.Layers))
	for i := range m.Layers {
		d := &m.Layers[i]
		name, err := blobName(d.Digest)
		if err != nil {
			return nil, nil, err
		}
		if mt := d.MediaType; !strings.HasPrefix(mt, "application/vnd.oci.image.layer.") &&
			!strings.HasPrefix(mt, "application/vnd.docker.image.rootfs.") || strings.HasSuffix(mt, "+encrypted") {
			return nil, nil, errcode.LayerMediaTypeUnsupported.New("layer %s has unsupported media type %q", d.Digest, mt)
		}
		layers[i] = layer{name: name, desc: d}
	}
	return &img, layers, checkImage(&img, layers, opts.Arch)
}

func isIndex(mediaType string) bool {
	return mediaType == v1.MediaTypeImageIndex || mediaType == mediaTypeDockerList
}

// pick chooses among an index's descriptors the one ref names (any if ref is
// empty) and, if several remain, the one for linux/arch. At the top of a
// layout several matches are ambiguous; inside an image index the first
// manifest for the platform wins, as variants are listed in preference order.
func pick(descs []v1.Descriptor, ref, arch string, top bool) (v1.Descriptor, error) {
	var cands, plat []v1.Descriptor
	seen := make(map[digest.Digest]bool) // an image tagged twice is still one image
	for _, d := range descs {
		if !seen[d.Digest] && (ref == "" || d.Digest.String() == ref ||
			refMatches(ref, d.Annotations[v1.AnnotationRefName], d.Annotations[containerdNameAnnotation])) {
			seen[d.Digest] = true
			cands = append(cands, d)
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	allPlatforms := true
	for _, d := range cands {
		allPlatforms = allPlatforms && d.Platform != nil
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			plat = append(plat, d)
		}
	}
	switch {
	case len(cands) == 0:
		return v1.Descriptor{}, errcode.ImageNotFound.New("no image matches %q", ref)
	case len(plat) == 0 && allPlatforms:
		return v1.Descriptor{}, errcode.ImageNotFound.New("no image for linux/%s", arch)
	case len(plat) == 1 || len(plat) > 1 && !top:
		return plat[0], nil
	}
	return v1.Descriptor{}, errcode.ImageAmbiguous.New("%d images match %q; select one by tag or digest", len(cands), ref)
}

// refMatches reports whether ref names an image with one of names. A bare
// tag on either side matches the tag of the other, and docker.io/library/
// is implied, so "alpine:3", "3" and "docker.io/library/alpine:3" all match
// each other.
func refMatches(ref string, names ...string) bool {
	short := func(s string) string { return strings.TrimPrefix(strings.TrimPrefix(s, "docker.io/"), "library/") }
	ref = short(ref)
	for _, n := range names {
		n = short(n)
		if n != "" && (n == ref || tagOf(n) == ref || !strings.ContainsAny(n, ":/") && tagOf(ref) == n) {
			return true
		}
	}
	return false
}

// tagOf returns the tag of a "name:tag" reference, or "".
func tagOf(ref string) string {
	i := strings.LastIndexByte(ref, ':')
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ""
	}
	return ref[i+1:]
}

// dockerManifest is one image in a legacy docker save's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// resolveDocker selects an image from a legacy docker save's manifest.json.
func resolveDocker(s source, opts Options) (*v1.Image, []layer, error) {
	var all []dockerManifest
	err := readJSON(s, "manifest.json", nil, &all)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, errcode.ImageInvalid.New("neither index.json nor manifest.json found")
	}
	if err != nil {
		return nil, nil, err
	}
	var cands []dockerManifest
	for _, m := range all {
		if opts.Ref == "" || opts.Ref == legacyDigest(m.Config).String() || refMatches(opts.Ref, m.RepoTags...) {
			cands = append(cands, m)
		}
	}
	switch {
	case len(cands) == 0:
		return nil, nil, errcode.ImageNotFound.New("no image matches %q", opts.Ref)
	case len(cands) > 1:
		return nil, nil, errcode.ImageAmbiguous.New("%d images match %q; select one by tag or image ID", len(cands), opts.Ref)
	}
	m := cands[0]
	// Docker names the config file for its digest: check it when it does.
	var want *v1.Descriptor
	if d := legacyDigest(m.Config); d != "" {
		want = &v1.Descriptor{Digest: d, Size: -1}
	}
	var img v1.Image
	if err := readJSON(s, m.Config, want, &img); err != nil {
		return nil, nil, err
	}
	layers := make([]layer, len(m.Layers))
	for i, name := range m.Layers {
		layers[i] = layer{name: name}
	}
	return &img, layers, checkImage(&img, layers, opts.Arch)
}

// legacyDigest returns the digest a docker save config file is named for
// ("<hex>.json" or "blobs/sha256/<hex>"), or "".
func legacyDigest(name string) digest.Digest {
	d := digest.NewDigestFromEncoded(digest.SHA256, strings.TrimSuffix(path.Base(name), ".json"))
	if d.Validate() != nil {
		return ""
	}
	return d
}

// checkImage checks that img runs on linux/arch and records its diff IDs
// in layers.
func checkImage(img *v1.Image, layers []layer, arch string) error {
	if img.OS != "" && img.OS != "linux" || img.Architecture != "" && img.Architecture != arch {
		return errcode.ImagePlatformMismatch.New("image is for %s/%s, not linux/%s", img.OS, img.Architecture, arch)
	}
	if len(img.RootFS.DiffIDs) != len(layers) {
		return errcode.ImageInvalid.New("config lists %d diff IDs for %d layers", len(img.RootFS.DiffIDs), len(layers))
	}
	for i, d := range img.RootFS.DiffIDs {
		if _, err := blobName(d); err != nil {
			return err
		}
		layers[i].diffID = d
	}
	return nil
}

// blobName returns the path of the blob with digest d in an OCI layout.
func blobName(d digest.Digest) (string, error) {
	if d.Algorithm() != digest.SHA256 {
		return "", errcode.DigestUnsupported.New("digest %q: only sha256 is supported", d)
	}
	if err := d.Validate(); err != nil {
		return "", errcode.ImageInvalid.New("malformed digest %q", d)
	}
	return "blobs/sha256/" + d.Encoded(), nil
}

// readJSON decodes the JSON document at name, or at want's blob if name is
// empty, into v. If want is not nil the document must match its digest
// (and size, unless negative).
func readJSON(s source, name string, want *v1.Descriptor, v any) error {
	if name == "" {
		var err error
		if name, err = blobName(want.Digest); err != nil {
			return err
		}
	}
	if want != nil && want.Size > maxJSONBytes {
		return errcode.ImageInvalid.New("%s is larger than %d bytes", name, maxJSONBytes)
	}
	rc, err := s.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	r := io.LimitReader(rc, maxJSONBytes+1)
	if want != nil {
		r = newVerifier(r, want.Digest, want.Size, name)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxJSONBytes {
		return errcode.ImageInvalid.New("%s is larger than %d bytes", name, maxJSONBytes)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errorf(errcode.ImageInvalid, err, "parsing %s: %v", name, err)
	}
	return nil
}

// verifier passes reads through while hashing them, and reports a mismatch
// with the expected size and digest as a read error, at the latest in place
// of EOF, so whoever reads to the end cannot miss it.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	size int64 // negative: unknown
	want digest.Digest
	name string
}

func newVerifier(r io.Reader, want digest.Digest, size int64, name string) *verifier {
	return &verifier{r: r, h: sha256.New(), size: size, want: want, name: name}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size || err == io.EOF && !v.ok() {
		return n, errcode.BlobDigestMismatch.New("%s: read %d bytes with digest %s, want %d bytes with digest %s",
			v.name, v.n, digest.NewDigest(digest.SHA256, v.h), v.size, v.want)
	}
	return n, err
}

func (v *verifier) ok() bool {
	return (v.size < 0 || v.n == v.size) && digest.NewDigest(digest.SHA256, v.h) == v.want
}

// errorf returns an errcode error with a reason and an underlying cause.
func errorf(reason errcode.Reason, cause error, format string, args ...any) error {
	e := reason.New(format, args...)
	e.Err = cause
	return e
}

// source is an image layout or docker save opened for reading.
type source interface {
	// Open opens the named regular file. Its error wraps fs.ErrNotExist
	// if there is none.
	Open(name string) (io.ReadCloser, error)
	Close() error
}

func openSource(src string) (source, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("opening image: %w", err)
	}
	if fi.IsDir() {
		root, err := os.OpenRoot(src)
		if err != nil {
			return nil, fmt.Errorf("opening image: %w", err)
		}
		return dirSource{root}, nil
	}
	return openTar(src)
}

// dirSource reads a layout directory. Its os.Root keeps symlinks in the
// layout from reaching files outside it.
type dirSource struct{ root *os.Root }

func (d dirSource) Open(name string) (io.ReadCloser, error) {
	// O_NONBLOCK keeps a FIFO in the layout from blocking the open.
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errcode.ImageInvalid.New("%s is not a regular file", name)
	}
	return f, nil
}

func (d dirSource) Close() error { return d.root.Close() }

// tarSource reads a tar of a layout or a docker save in place: a first pass
// records where each file's bytes are, and Open returns that section of the
// archive, so nothing is extracted or held in memory.
type tarSource struct {
	f     *os.File
	files map[string]tarFile
}

// tarFile is a regular file's bytes in the archive, or a link to another.
type tarFile struct {
	off, size int64
	link      string
}

func openTar(name string) (*tarSource, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("opening image: %w", err)
	}
	s := &tarSource{f: f, files: make(map[string]tarFile)}
	tr := tar.NewReader(f)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return s, nil
		}
		if err == nil && n == maxEntries {
			err = fmt.Errorf("more than %d entries", maxEntries)
		}
		if err != nil {
			f.Close()
			return nil, errorf(errcode.ImageInvalid, err, "reading %s as a tar archive: %v", name, err)
		}
		// tar.Reader reads headers exactly, so the file offset is now
		// where this entry's content starts.
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		entry := path.Clean(strings.TrimLeft(hdr.Name, "/"))
		switch hdr.Typeflag {
		case tar.TypeReg:
			s.files[entry] = tarFile{off: off, size: hdr.Size}
		case tar.TypeSymlink: // older docker saves link layers shared between images
			s.files[entry] = tarFile{link: path.Join(path.Dir(entry), hdr.Linkname)}
		case tar.TypeLink:
			s.files[entry] = tarFile{link: path.Clean(hdr.Linkname)}
		}
	}
}

func (s *tarSource) Open(name string) (io.ReadCloser, error) {
	name = path.Clean(name)
	for range 8 {
		f, ok := s.files[name]
		if !ok {
			return nil, fmt.Errorf("opening %s: %w", name, fs.ErrNotExist)
		}
		if f.link == "" {
			return io.NopCloser(io.NewSectionReader(s.f, f.off, f.size)), nil
		}
		name = f.link
	}
	return nil, errcode.ImageInvalid.New("%s: too many links", name)
}

func (s *tarSource) Close() error { return s.f.Close() }

// CheckMountPoints checks the tree in root: each of paths (relative to
// it), and each of its parents, must be a real directory or absent. Unpack
// runs it on the result of all layers, as a later layer may replace an
// earlier one's directory with a link, or white it out; callers run it on
// other trees a sandbox's root is made of. whose names the tree in the
// error, which has reason "image_mount_point_invalid".
func CheckMountPoints(root *os.Root, paths []string, whose string) error {
	for _, p := range paths {
		p = path.Clean(strings.TrimLeft(p, "/"))
	components:
		for i := 0; i <= len(p); i++ {
			if i < len(p) && p[i] != '/' {
				continue
			}
			dir := p[:i]
			// The parents are checked first, so Lstat follows no link.
			fi, err := root.Lstat(dir)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				break components // absent: the caller makes it
			case err != nil:
				return fmt.Errorf("checking /%s: %w", dir, err)
			case fi.IsDir():
				continue
			}
			what := "a file"
			switch fi.Mode().Type() {
			case fs.ModeSymlink:
				target, _ := root.Readlink(dir)
				what = fmt.Sprintf("a symbolic link to %.200q", target)
			case 0:
			default:
				what = "a special file"
			}
			return errcode.ImageMountPointInvalid.New("%s /%s is %s, not a directory: sandboxes mount over /%s", whose, dir, what, p)
		}
	}
	return nil
}
