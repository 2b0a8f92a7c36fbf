package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/jobspec"
)

// ManifestFile is the name of an action bundle's manifest.
const ManifestFile = "berth-action.json"

// Manifest describes an action bundle: a directory holding the manifest
// and the files it lists, each with its SHA-256. The bundle builds on a
// built-in action: its files (templates, stylesheets, fonts, images) are
// placed beside the job's inputs, and its options are the defaults the
// job's own options override.
type Manifest struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Base    string          `json:"base"`
	Profile string          `json:"profile"`
	Runner  int             `json:"runner_api"`
	Options json.RawMessage `json:"options,omitempty"`
	// Files maps each file's path in the bundle to its SHA-256 (hex).
	Files map[string]string `json:"files"`
	// RuntimeDigest, when set, pins the job runtime the bundle needs
	// ("sha256:..." as berth actions shows it): on another runtime the
	// action is VERSION_MISMATCH.
	RuntimeDigest string `json:"runtime_digest,omitempty"`
}

// Limits on bundles: they are read into memory at load.
const (
	maxBundleFiles = 256
	maxBundleBytes = 64 << 20
)

// action is a registered action: a built-in, or a bundle as loaded.
type action struct {
	spec    jobspec.Action
	builtin bool
	dir     string            // bundles: their directory
	files   map[string][]byte // bundles: the verified files
	options json.RawMessage   // bundles: default options
	runner  int
	pin     string // bundles: the runtime digest they need, or ""
	// invalid is why a bundle cannot be used (ACTION_INVALID).
	invalid string

	// What health last found on disk: the directory's stamp and, if the
	// files differ from the verified snapshot, why.
	mu      sync.Mutex
	stamp   string
	changed string
}

// recheck reports why a bundle's files on disk no longer verify, or "".
// It hashes them again only when the directory's stamp (names, sizes,
// modification times) moved since the last look: health runs on every
// submit.
func (a *action) recheck() string {
	st := stampOf(a.dir)
	a.mu.Lock()
	defer a.mu.Unlock()
	if st != a.stamp {
		a.stamp, a.changed = st, loadBundle(a.dir).invalid
	}
	return a.changed
}

// stampOf lists every entry under dir with its size, mode and time.
func stampOf(dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%v\x00%d\n", p, info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		fmt.Fprintf(&b, "error %v", err)
	}
	return b.String()
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// profiles are the runtime profiles Berth defines.
var profiles = []string{jobspec.ProfileBrowser, jobspec.ProfileOffice, jobspec.ProfilePDF, jobspec.ProfileWeb}

// loadActions returns the built-ins and the bundles in dir ("" for none).
// A bundle that fails verification is registered as invalid, so health
// names it instead of calling it missing.
func loadActions(dir string) (map[string]*action, error) {
	out := map[string]*action{}
	for _, a := range jobspec.Builtins {
		out[a.Name] = &action{spec: a, builtin: true, runner: jobspec.RunnerAPI}
	}
	if dir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the actions directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		a := loadBundle(filepath.Join(dir, e.Name()))
		if _, taken := out[a.spec.Name]; taken {
			if prev := out[a.spec.Name]; prev.builtin {
				continue // a bundle cannot replace a built-in
			}
		}
		out[a.spec.Name] = a
	}
	return out, nil
}

// loadBundle reads and verifies one bundle directory.
func loadBundle(dir string) *action {
	a := &action{dir: dir, spec: jobspec.Action{Name: filepath.Base(dir)}, stamp: stampOf(dir)}
	fail := func(format string, args ...any) *action {
		a.invalid = fmt.Sprintf(format, args...)
		a.files = nil
		return a
	}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return fail("no readable %s: %v", ManifestFile, errors.Unwrap(err))
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return fail("%s: %v", ManifestFile, err)
	}
	if m.Name != "" {
		a.spec.Name = m.Name
	}
	a.spec.Version, a.spec.Profile, a.spec.Base, a.runner = m.Version, m.Profile, m.Base, m.Runner
	a.pin = m.RuntimeDigest
	base, ok := jobspec.Builtin(m.Base)
	switch {
	case !nameRE.MatchString(a.spec.Name):
		return fail("name %q: lower-case letters, digits and '-', at most 64", a.spec.Name)
	case m.Version == "":
		return fail("no version")
	case m.RuntimeDigest != "" && !digestRE.MatchString(m.RuntimeDigest):
		return fail("runtime_digest %q: want sha256: and 64 lower-case hex digits", m.RuntimeDigest)
	case !ok:
		return fail("base %q is not a built-in action", m.Base)
	}
	a.spec.Inputs, a.spec.Output = base.Inputs, base.Output
	a.spec.Description = "bundle on " + base.Name
	if a.spec.Profile == "" {
		a.spec.Profile = base.Profile
	}
	if len(m.Options) > 0 {
		o, err := jobspec.ParseOptions(m.Options)
		if err != nil {
			return fail("%v", err)
		}
		if p := o.Validate(base.Name); len(p) > 0 {
			return fail("options: %v", p)
		}
		a.options = m.Options
	}
	if len(m.Files) > maxBundleFiles {
		return fail("more than %d files", maxBundleFiles)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fail("%v", err)
	}
	defer root.Close()
	// Every file on disk must be listed, and every listed file must be
	// there with its hash: an added file is tampering too.
	listed := map[string]bool{ManifestFile: true}
	a.files = map[string][]byte{}
	total := 0
	names := slicesSorted(m.Files)
	for _, name := range names {
		want := strings.ToLower(m.Files[name])
		if err := jobspec.CheckName(name); err != nil {
			return fail("file %v", err)
		}
		listed[name] = true
		b, err := root.ReadFile(name)
		if err != nil {
			return fail("file %s: %v", name, errors.Unwrap(err))
		}
		total += len(b)
		if total > maxBundleBytes {
			return fail("larger than %d bytes", maxBundleBytes)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != want {
			return fail("bundle hash mismatch: %s has SHA-256 %s, the manifest says %s", name, got, want)
		}
		a.files[name] = b
	}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !listed[p] {
			return fmt.Errorf("%s is not in the manifest", p)
		}
		return nil
	})
	if err != nil {
		return fail("%v", err)
	}
	return a
}

func slicesSorted(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// optionList is the options the action takes, a bundle's defaults in
// place of the built-in ones.
func (a *action) optionList() []apitype.ActionOption {
	var defaults map[string]any
	_ = json.Unmarshal(a.options, &defaults) // checked at load
	var out []apitype.ActionOption
	for _, o := range jobspec.OptionSpecs(a.spec.Base) {
		if v, ok := defaults[o.Name]; ok {
			o.Default = v
		}
		out = append(out, o.ActionOption)
	}
	return out
}
