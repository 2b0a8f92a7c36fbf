//go:build !linux

package agent

import (
	"io/fs"
	"os"

	"github.com/berthdev/berth/internal/errcode"
)

// The file API resolves paths on Linux descriptors (resolve_linux.go);
// elsewhere it is unimplemented.
type wsRoot struct{}

type dir struct{}

func (a *Agent) workspace() (*wsRoot, error) {
	return nil, errcode.New(errcode.Unimplemented, "the file API needs Linux")
}

func (w *wsRoot) Close() error                              { return nil }
func (w *wsRoot) openDir(string) (*dir, error)              { return nil, errUnsupported() }
func (w *wsRoot) lookup(string, bool) (*dir, string, error) { return nil, "", errUnsupported() }
func (w *wsRoot) mkdirAll(string, fs.FileMode) (*dir, error) {
	return nil, errUnsupported()
}

func (d *dir) Close() error                                 { return nil }
func (d *dir) lstat(string) (fs.FileInfo, error)            { return nil, errUnsupported() }
func (d *dir) stat(string) (fs.FileInfo, error)             { return nil, errUnsupported() }
func (d *dir) openRead(string) (*os.File, error)            { return nil, errUnsupported() }
func (d *dir) readDir() (*os.File, error)                   { return nil, errUnsupported() }
func (d *dir) create(string, fs.FileMode) (*os.File, error) { return nil, errUnsupported() }
func (d *dir) remove(string) error                          { return errUnsupported() }
func (d *dir) removeAll(string) error                       { return errUnsupported() }
func rename(*dir, string, *dir, string, bool) error         { return errUnsupported() }
func errUnsupported() error                                 { return errcode.New(errcode.Unimplemented, "the file API needs Linux") }
