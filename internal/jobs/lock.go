package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
)

// DpkgStatus is the package database the runtime digest reads.
const DpkgStatus = "/var/lib/dpkg/status"

// runtimeLock identifies the job runtime by a digest recorded when the
// service starts (when this daemon builds the runtime's template) and
// notices when what it covers changes under the daemon.
//
// The digest is a SHA-256 over: the Berth binary that runs in every job
// sandbox as its agent and runner (path, size, mode and the SHA-256 of its
// content); every installed Debian package (name, version, architecture,
// from the dpkg database), which covers what the runtime's read-only /usr
// holds (Chromium, LibreOffice, fonts, libraries); and the profiles'
// entry points (the Chromium and soffice the runner starts: path, size,
// mode, content hash). Hashing all of /usr (gigabytes) would cost seconds;
// this costs one read of the Berth binary (about 50 MB) and of the dpkg
// database (under 1 MB).
type runtimeLock struct {
	files []string // besides the dpkg database: hashed whole

	// mu guards what follows.
	mu       sync.Mutex
	recorded string        // at record
	cost     time.Duration // of the last computation
	stamp    string        // of the files when now was computed
	now      string        // the digest as of stamp
	err      string        // why now could not be computed
}

// record computes the digest and keeps it as the runtime's.
func (l *runtimeLock) record() (string, time.Duration, error) {
	d, st, cost, err := l.compute()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cost = cost
	if err != nil {
		l.err = err.Error()
		return "", cost, err
	}
	l.recorded, l.now, l.stamp, l.err = d, d, st, ""
	return d, cost, nil
}

// check returns the recorded digest and the current one. The files are
// hashed again only when their stamp (size, mode, modification time,
// inode) moved since the last look: health runs on every submit.
func (l *runtimeLock) check() (recorded, now, why string) {
	l.mu.Lock()
	rec, last := l.recorded, l.stamp
	l.mu.Unlock()
	if rec == "" {
		return "", "", ""
	}
	if st := l.stampNow(); st != last {
		d, st, cost, err := l.compute()
		l.mu.Lock()
		l.cost = cost
		if err != nil {
			l.err = err.Error()
		} else {
			l.now, l.stamp, l.err = d, st, ""
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recorded, l.now, l.err
}

func (l *runtimeLock) paths() []string {
	return append([]string{DpkgStatus}, l.files...)
}

// stampNow describes the covered files cheaply (one stat each).
func (l *runtimeLock) stampNow() string {
	var b strings.Builder
	for _, p := range l.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s\x00missing\n", p)
			continue
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = uint64(st.Ino)
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%v\x00%d\x00%d\n", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano(), ino)
	}
	return b.String()
}

// digests caches digests by the stamp of what they cover, for this
// process: daemons started one after another (tests, restarts in
// process) hash an unchanged binary once. A stamp holds each file's
// size, modification time and inode, so a replaced or rewritten file
// misses the cache.
var digests struct {
	sync.Mutex
	m map[string]string
}

// compute returns the digest, the stamp it was computed at and its cost.
func (l *runtimeLock) compute() (digest, stamp string, cost time.Duration, _ error) {
	start := time.Now()
	stamp = l.stampNow()
	digests.Lock()
	d, ok := digests.m[stamp]
	digests.Unlock()
	if ok {
		return d, stamp, time.Since(start), nil
	}
	d, err := l.hash()
	if err != nil {
		return "", "", time.Since(start), err
	}
	digests.Lock()
	if digests.m == nil || len(digests.m) > 64 {
		digests.m = map[string]string{}
	}
	digests.m[stamp] = d
	digests.Unlock()
	return d, stamp, time.Since(start), nil
}

// hash computes the digest.
func (l *runtimeLock) hash() (string, error) {
	h := sha256.New()
	for _, p := range l.files {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", p, err)
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file\x00%s\x00%d\x00%v\x00%s\n", p, fi.Size(), fi.Mode(), sum)
	}
	pkgs, err := dpkgPackages(DpkgStatus)
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	for _, p := range pkgs {
		fmt.Fprintf(h, "pkg\x00%s\n", p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dpkgPackages lists the installed packages of a dpkg status file as
// "name version architecture", sorted.
func dpkgPackages(status string) ([]string, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return nil, err
	}
	var out []string
	var name, version, arch, state string
	flush := func() {
		if name != "" && strings.HasSuffix(state, " installed") {
			out = append(out, name+" "+version+" "+arch)
		}
		name, version, arch, state = "", "", "", ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation line
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			name = v
		case "Version":
			version = v
		case "Architecture":
			arch = v
		case "Status":
			state = v
		}
	}
	flush()
	slices.Sort(out)
	return out, nil
}

// lockFiles are the files the digest hashes whole: the Berth binary and
// the profiles' entry points, with links resolved, once each.
func lockFiles(candidates ...string) []string {
	var out []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// newRuntimeLock covers the Berth binary job sandboxes run and the
// profiles' entry points.
func (s *Service) newRuntimeLock() *runtimeLock {
	chromium := s.cfg.Chromium
	if chromium == "" {
		chromium = browser.FindChromium()
	}
	soffice := s.cfg.Soffice
	if soffice == "" {
		soffice = "soffice"
	}
	if p, err := exec.LookPath(soffice); err == nil {
		soffice = p
	} else {
		soffice = ""
	}
	var bin string
	if s.mgr != nil {
		bin = s.mgr.Config().AgentBinary
	}
	return &runtimeLock{files: lockFiles(bin, chromium, soffice)}
}

// recordRuntime records the job runtime's digest as this daemon builds
// it.
func (s *Service) recordRuntime(ctx context.Context) {
	d, cost, err := s.lock.record()
	if err != nil {
		s.log.WarnContext(ctx, "computing the job runtime digest failed", "err", err)
		return
	}
	s.log.InfoContext(ctx, "job runtime digest recorded", "digest", d, "ms", cost.Milliseconds())
}

// RuntimeDigest returns the job runtime's digest as recorded at start and,
// when it differs, as it is now.
func (s *Service) RuntimeDigest() (recorded, now string) {
	rec, cur, _ := s.lock.check()
	if cur == rec {
		cur = ""
	}
	return rec, cur
}

// Hints for the runtime lock's reasons, after the seed's ("upgrade or
// roll back one side"; "inspect digest and provider logs").
const (
	hintVersion = "upgrade or roll back one side: install the action's bundle of that version, or ask for the version this daemon has (berth actions)"
	hintPin     = "upgrade or roll back one side: the bundle's runtime_digest pins another job runtime than this Berth's (berth actions shows it); reinstall a bundle built for it, or the Berth and packages the bundle was built for"
	hintDrift   = "inspect the digest (berth actions: runtime_digest and runtime_digest_now) and the daemon's log: Berth's binary or the host's packages changed under the running daemon; restart berth serve to rebuild the runtime and record its digest"
)

// lockProblem checks the runtime lock for action a: a bundle pinned to
// another runtime is VERSION_MISMATCH; a runtime changed since it was
// recorded is PROFILE_UNHEALTHY. It sets h's runtime digest.
func (s *Service) lockProblem(a *action, h *apitype.ActionHealth) (reason, msg, hint string) {
	rec, now, why := s.lock.check()
	h.RuntimeDigest = cmp.Or(a.pin, rec)
	switch {
	case rec == "" && why != "":
		return ProfileUnhealthy, "the job runtime's digest cannot be computed: " + why, hintDrift
	case rec == "":
		return "", "", "" // not started yet
	case a.pin != "" && a.pin != rec:
		return VersionMismatch, fmt.Sprintf("the action needs job runtime %s; this daemon's is %s", a.pin, rec), hintPin
	case why != "":
		return ProfileUnhealthy, "the job runtime's digest cannot be computed: " + why, hintDrift
	case now != rec:
		return ProfileUnhealthy, fmt.Sprintf("the job runtime changed under this daemon: it was %s when recorded, it is %s now", rec, now), hintDrift
	}
	return "", "", ""
}
