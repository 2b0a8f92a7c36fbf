package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// maxSunPath is the size of sockaddr_un.sun_path on Linux, NUL included.
const maxSunPath = 108

// ListenFile makes a listening unix socket at path (replacing a stale one)
// and returns it as a file to hand to an agent, which serves on it with
// --listen-fd. The socket file stays when the returned file is closed.
func ListenFile(path string) (*os.File, error) {
	os.Remove(path)
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	defer ul.Close()
	return ul.File()
}

// listenUnix listens on a unix socket at path, even when path is longer
// than sun_path allows, by binding through /proc/self/fd of its directory.
func listenUnix(path string) (net.Listener, error) {
	if len(path) < maxSunPath {
		return net.Listen("unix", path)
	}
	var ln net.Listener
	err := viaDirFD(path, func(short string) error {
		var err error
		ln, err = net.Listen("unix", short)
		return err
	})
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false) // the short name is meaningless later
	}
	return ln, err
}

// dialUnix connects to the unix socket at path, long paths included.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) < maxSunPath {
		return d.DialContext(ctx, "unix", path)
	}
	var c net.Conn
	err := viaDirFD(path, func(short string) error {
		var err error
		c, err = d.DialContext(ctx, "unix", short)
		return err
	})
	return c, err
}

func viaDirFD(path string, fn func(short string) error) error {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return fn("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path))
}
