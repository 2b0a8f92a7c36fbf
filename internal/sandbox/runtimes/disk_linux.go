package runtimes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The workspace of an isolated sandbox is its own ext4 file system in a
// sparse image file, loop-mounted: writing past its size fails with ENOSPC
// inside the sandbox (and running out of inodes does too), and the host
// loses at most the image's size. Portable across host file systems,
// unlike project quotas, and the image moves with the sandbox.

// diskImage is the name of the workspace image in a sandbox's directory.
const diskImage = "workspace.img"

// mountWorkspaceDisk makes (if needed) the sandbox's workspace image of
// sizeMB and mounts it on dir, owned by uid.
func mountWorkspaceDisk(sandboxDir, dir string, sizeMB int64, uid int) error {
	if isMountPoint(dir) {
		return nil
	}
	img := filepath.Join(sandboxDir, diskImage)
	fresh := false
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		if err := makeDiskImage(img, sizeMB); err != nil {
			return err
		}
		fresh = true
	}
	if err := loopMount(img, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if fresh {
		// A workspace starts empty, not with mkfs's lost+found.
		_ = os.Remove(filepath.Join(dir, "lost+found"))
		if err := os.Chown(dir, uid, uid); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// mountScratchWorkspace mounts a tmpfs of sizeMB on dir, owned by uid, for
// a sandbox whose workspace lives as long as it runs (Resources.Scratch).
// Its pages are charged to the memory cgroup of the process that writes
// them: the sandbox's. Its inodes are bounded as an ext4 workspace's of
// the same size would be (one per 16 KiB).
func mountScratchWorkspace(_, dir string, sizeMB int64, uid int) error {
	if isMountPoint(dir) {
		return nil
	}
	opts := fmt.Sprintf("size=%dm,nr_inodes=%d,mode=755,uid=%d,gid=%d", sizeMB, max(sizeMB*64, 1024), uid, uid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the scratch workspace: %w", err)
	}
	return nil
}

// makeDiskImage writes an empty, sparse ext4 image: a few milliseconds
// with lazy initialisation, and no space used until written.
func makeDiskImage(img string, sizeMB int64) error {
	tmp := img + ".new"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = f.Truncate(sizeMB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, img)
}

// loopMount attaches img to a free loop device that detaches itself when
// unmounted (autoclear), and mounts it on dir.
func loopMount(img, dir, fstype string, flags uintptr) error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening loop control: %w", err)
	}
	defer ctl.Close()
	imgF, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer imgF.Close()
	for range 10 { // another attach may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("finding a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_FD, int(imgF.Fd()))
		if errors.Is(err, unix.EBUSY) {
			loop.Close()
			continue
		}
		if err != nil {
			loop.Close()
			return fmt.Errorf("attaching %s: %w", dev, err)
		}
		info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
		copy(info.File_name[:], img)
		if err := unix.IoctlLoopSetStatus64(int(loop.Fd()), &info); err != nil {
			_ = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
			loop.Close()
			return fmt.Errorf("configuring %s: %w", dev, err)
		}
		err = unix.Mount(dev, dir, fstype, flags, "")
		if err != nil {
			_ = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		}
		loop.Close()
		if err != nil {
			return fmt.Errorf("mounting the workspace: %w", err)
		}
		return nil
	}
	return errors.New("no free loop device")
}

// waitLoopDetached waits, at most a few seconds, until no loop device is
// backed by img.
func waitLoopDetached(ctx context.Context, img string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		devs := loopDevicesOf(img)
		if len(devs) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("loop devices %v still hold %s", devs, img)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopDevicesOf lists the loop devices backed by img.
func loopDevicesOf(img string) []string {
	var out []string
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
		if err == nil && strings.TrimSpace(string(b)) == img {
			out = append(out, e.Name())
		}
	}
	return out
}
