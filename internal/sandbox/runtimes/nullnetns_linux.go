package runtimes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// runsc starts each gofer in an empty network namespace shared by every
// gofer of its --root: the first gofer's is pinned by a bind mount of its
// nsfs file at <root>/null-netns (runsc's pinNullNetNS), which runsc never
// removes. Running sandboxes do not need the mount (their gofers are in the
// namespace already); it only spares the next start making a namespace. So
// the daemon unpins it once no gVisor container is left: when one is
// stopped, and at shutdown. While gVisor sandboxes run, it stays, and they
// keep running and are re-adopted across a daemon restart as before.

// nullNetNS is the path of runsc's pinned gofer network namespace.
func (r *Container) nullNetNS() string {
	return filepath.Join(r.dataDir, "oci", "runsc", "null-netns")
}

// unpinNullNetNS unmounts (every stacked copy of) the pinned namespace and
// removes its mount point, if no container of this runtime is left. A start
// racing it either finds the namespace (and holds it by its fd) or pins a
// new one, so neither side fails.
func (r *Container) unpinNullNetNS(ctx context.Context) error {
	if r.program != "runsc" || r.err != nil {
		return nil
	}
	path := r.nullNetNS()
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ids, err := r.List(ctx)
	if err != nil || len(ids) > 0 {
		return err
	}
	for unix.Unmount(path, unix.MNT_DETACH) == nil {
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing runsc's null network namespace: %w", err)
	}
	return nil
}

// Close releases what the runtime holds beyond its sandboxes, at daemon
// shutdown: gVisor's pinned gofer network namespace, unless a gVisor
// sandbox still runs (it is re-adopted by the next start).
func (r *Container) Close(ctx context.Context) error {
	return r.unpinNullNetNS(ctx)
}
