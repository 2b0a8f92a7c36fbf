package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/image"
)

// ImportTemplate makes template name from an OCI image layout (a
// directory or a tar of one) or a docker save tarball at src. ref picks
// the image when src holds several. The image is unpacked next to its
// final place and renamed in when whole: a failed import leaves nothing.
func (m *Manager) ImportTemplate(ctx context.Context, name, src, ref string) (*Template, error) {
	p := map[string]string{}
	validTemplateName(name, p)
	if len(p) > 0 {
		return nil, errcode.InvalidFields(p)
	}
	t, err := m.newTemplate(ctx, "", name, apitype.TemplateImport, "", TemplateConfig{})
	if err != nil {
		return nil, err
	}
	dir := m.templateDir(t.ID)
	err = func() error {
		tmp := filepath.Join(dir, "rootfs.new")
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		cfg, err := image.Unpack(ctx, src, tmp, image.Options{Ref: ref, MountPoints: MountPoints()})
		if err != nil {
			return err
		}
		if err := imageSkeleton(tmp); err != nil {
			return fmt.Errorf("preparing the image's root: %w", err)
		}
		t.Config.Env = imageEnv(cfg.Env)
		return os.Rename(tmp, filepath.Join(dir, "rootfs"))
	}()
	if err != nil {
		// An import runs in the caller's request: nothing of it stays.
		_ = os.RemoveAll(dir)
		if derr := m.store.DeleteTemplate(context.WithoutCancel(ctx), t.ID); derr != nil {
			m.log.ErrorContext(ctx, "removing a failed import", "template", name, "err", derr)
		}
		return nil, err
	}
	m.finishTemplate(ctx, t, nil)
	return t, nil
}

// imageEnv keeps an image's environment but PATH's and HOME's neighbours
// that only make sense in its own tooling; the agent sets HOME and PATH.
func imageEnv(env []string) map[string]string {
	out := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && k != "HOME" && k != "HOSTNAME" {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// imageSkeleton adds what a Berth sandbox mounts over to an image's root:
// mount points, the agent binary's place, and network files.
func imageSkeleton(root string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range MountPoints() { // Unpack checked they are directories or absent
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("making /%s: %w", d, err)
		}
	}
	_ = r.Chmod("tmp", 0o1777)
	files := map[string]string{
		".berth/berth":    "",
		"etc/hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"etc/resolv.conf": "",
		"etc/hostname":    "sandbox\n",
	}
	for name, content := range files {
		_ = r.RemoveAll(name) // never write through what the image put there
		if err := r.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing /%s: %w", name, err)
		}
	}
	return r.Chmod(".berth/berth", 0o755)
}

// freezeTree copies src into dst (which must not exist) as a read-only
// layer: owned by root, group and other write bits cleared, overlay
// whiteouts and opaque directories kept so deletions stay deletions.
// skip names paths (relative to src) left out. Special files other than
// whiteouts are dropped.
func freezeTree(src, dst string, skip map[string]bool) error {
	tmp := dst + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(tmp, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm() &^ 0o022
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.IsDir():
			if err := os.Mkdir(target, perm|fi.Mode()&fs.ModeSticky); err != nil {
				return err
			}
			if v, err := unix.Lgetxattr(p, "trusted.overlay.opaque", make([]byte, 8)); err == nil && v > 0 {
				if err := unix.Lsetxattr(target, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
					return err
				}
			}
		case d.Type().IsRegular():
			if err := copyRegular(p, target, perm); err != nil {
				return err
			}
		case d.Type()&fs.ModeCharDevice != 0:
			st, ok := fi.Sys().(*unix.Stat_t)
			if !ok || st.Rdev != 0 {
				return nil // not a whiteout: no devices in layers
			}
			if err := unix.Mknod(target, unix.S_IFCHR, 0); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Lchown(target, 0, 0)
	})
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
	}
	return err
}

func copyRegular(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // past the umask
}
