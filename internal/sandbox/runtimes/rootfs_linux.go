package runtimes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/image"
	"github.com/berthdev/berth/internal/sandbox"
)

// hostTemplate is the built-in "host" template: a read-only root composed
// from this machine's system directories, bind-mounted read-only, and a
// small allowlist of /etc copied in, the way bubblewrap composes one. It
// never holds /etc/shadow, /root, /home, /var, /run, Berth's data or any
// socket.
type hostTemplate struct {
	rootfs string   // the template directory: the overlay's lower layer
	binds  []string // host directories to bind read-only at the same path
}

// hostSystemDirs are the host directories a sandbox sees. On merged-/usr
// systems all but /usr are symbolic links and are copied as such.
var hostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostEtc is what of /etc a sandbox sees: what programs need to run, find
// libraries, certificates, time zones and the like. Never secrets.
var hostEtc = []string{
	"alternatives", "bash.bashrc", "chromium", "chromium.d", "ca-certificates", "ca-certificates.conf", "debian_version",
	"environment", "fonts", "gai.conf", "host.conf", "ImageMagick-6", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "libreoffice", "locale.alias", "localtime", "login.defs", "magic", "magic.mime", "matplotlibrc", "mime.types",
	"netconfig", "networks", "nsswitch.conf", "os-release", "papersize", "profile", "profile.d", "protocols",
	"python3", "python3.11", "rpc", "services", "shells", "ssl/certs", "ssl/openssl.cnf", "timezone",
	"xattr.conf",
}

// checkRoot checks the mount points of the sandbox root at dir, and binds
// (absolute paths the root gets host directories mounted at), before a
// runtime mounts over them.
func checkRoot(dir string, binds []string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := image.CheckMountPoints(r, append(sandbox.MountPoints(), binds...), "the sandbox root's"); err != nil {
		return err
	}
	// The agent binary is bind-mounted over this file.
	if fi, err := r.Lstat(strings.TrimPrefix(agentPathInSandbox, "/")); err == nil && !fi.Mode().IsRegular() {
		return errcode.ImageMountPointInvalid.New("the sandbox root's %s is not a regular file: the agent is mounted over it", agentPathInSandbox)
	}
	return nil
}

// hostTemplates holds, per templates directory, the host template this
// daemon process built; the container and gvisor runtimes share it.
var hostTemplates struct {
	sync.Mutex
	built map[string]*hostTemplate
}

// sharedHostTemplate returns this process's host template under parent,
// building it on first use. Each daemon process builds a new one (cheap: a
// few hundred small files), so host updates reach new sandboxes; a
// template is never changed or removed while a sandbox's overlay uses it
// as its lower layer, and older ones no overlay uses are removed.
func sharedHostTemplate(parent string) (*hostTemplate, error) {
	hostTemplates.Lock()
	defer hostTemplates.Unlock()
	if t, ok := hostTemplates.built[parent]; ok {
		return t, nil
	}
	dir := filepath.Join(parent, "host-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	t, err := buildHostTemplate(dir)
	if err != nil {
		return nil, err
	}
	if hostTemplates.built == nil {
		hostTemplates.built = map[string]*hostTemplate{}
	}
	hostTemplates.built[parent] = t
	removeUnusedTemplates(parent, dir)
	return t, nil
}

// removeUnusedTemplates deletes the templates under parent, but keep, that
// no mounted overlay has as its lower layer.
func removeUnusedTemplates(parent, keep string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		dir := filepath.Join(parent, e.Name())
		if dir == keep || !strings.HasPrefix(e.Name(), "host") {
			continue
		}
		if strings.Contains(string(b), "lowerdir="+dir+"/rootfs") {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// buildHostTemplate creates the host template in dir, which must not exist.
func buildHostTemplate(dir string) (*hostTemplate, error) {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(tmp, "rootfs")
	for _, d := range sandbox.MountPoints() {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return nil, err
		}
	}
	_ = os.Chmod(filepath.Join(rootfs, "tmp"), 0o1777)
	// The mount point of the agent binary.
	if err := os.WriteFile(filepath.Join(rootfs, ".berth", "berth"), nil, 0o755); err != nil {
		return nil, err
	}
	t := &hostTemplate{rootfs: filepath.Join(dir, "rootfs")}
	for _, d := range hostSystemDirs {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(target, filepath.Join(rootfs, d)); err != nil {
				return nil, err
			}
		case fi.IsDir():
			if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
				return nil, err
			}
			t.binds = append(t.binds, d)
		}
	}
	for _, name := range hostEtc {
		if err := copyTree(filepath.Join("/etc", name), filepath.Join(rootfs, "etc", name)); err != nil {
			return nil, fmt.Errorf("copying /etc/%s: %w", name, err)
		}
	}
	// Fontconfig's cache: without it every program that draws text
	// (Chromium, LibreOffice) scans every font at start, a second here.
	if err := copyTree("/var/cache/fontconfig", filepath.Join(rootfs, "var", "cache", "fontconfig")); err != nil {
		return nil, fmt.Errorf("copying the fontconfig cache: %w", err)
	}
	files := map[string]string{
		"etc/hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"etc/resolv.conf": "", // network none: no resolver
		"etc/hostname":    "sandbox\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return t, nil
}

// copyTree copies src to dst: regular files, directories and symbolic
// links (as links), nothing else. A missing src is not an error.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == src {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	// World-readable files only: a root-only file in /etc is a secret.
	if fi.Mode().Perm()&0o004 == 0 {
		return nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// sandboxEtc writes the files of /etc that are the sandbox's own (its user
// and group) into dir, the overlay's upper /etc.
func sandboxEtc(dir string, uid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:sandbox:/workspace:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", uid)
	for name, content := range map[string]string{"passwd": passwd, "group": group} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// isMountPoint reports whether path is a mount point, from mountinfo.
func isMountPoint(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == path {
			return true
		}
	}
	return false
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			if mp := unescapeMount(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
				out = append(out, mp)
			}
		}
	}
	// Longer paths first: children before parents.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// prepareWritableRoot gives a template build's user the directories it may
// install into: /opt, and /usr/local when /usr is the image's own.
func prepareWritableRoot(upper string, uid int, image bool) error {
	dirs := []string{"opt"}
	if image {
		dirs = append(dirs, "usr/local")
	}
	for _, d := range dirs {
		p := filepath.Join(upper, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return err
		}
	}
	return nil
}
