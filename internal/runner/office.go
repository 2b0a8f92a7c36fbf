package runner

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/jobspec"
)

// Bounds of LibreOffice runs.
const (
	officeWarmTimeout = 60 * time.Second
	officeWaitDelay   = 2 * time.Second
	maxOfficeLog      = 4 << 10
)

// office converts documents with LibreOffice: one soffice process group
// per job, from a user profile warmed at start.
type office struct {
	exe     string
	log     *slog.Logger
	dir     string // under os.TempDir(): profile/, home/ and the jobs' work directories
	home    string
	profile string // the user installation, as a file: URL

	// mu guards the fields below.
	mu      sync.Mutex
	closed  bool
	running *exec.Cmd     // the conversion in progress
	done    chan struct{} // closed when it has been waited for
}

// startOffice makes the LibreOffice user profile, by running soffice once
// to its end of initialisation, so that each job's soffice starts quickly.
func startOffice(ctx context.Context, exe string, log *slog.Logger) (*office, error) {
	dir, err := os.MkdirTemp("", "berth-office-")
	if err != nil {
		return nil, err
	}
	o := &office{exe: exe, log: log, dir: dir, home: filepath.Join(dir, "home")}
	o.profile = (&url.URL{Scheme: "file", Path: filepath.Join(dir, "profile")}).String()
	if err := os.Mkdir(o.home, 0o700); err != nil {
		o.close()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, officeWarmTimeout)
	defer cancel()
	if out, err := o.soffice(wctx, "--headless", "--norestore", "--nolockcheck", "--nodefault",
		"-env:UserInstallation="+o.profile, "--terminate_after_init"); err != nil {
		o.close()
		return nil, fmt.Errorf("soffice --terminate_after_init: %w: %s", err, out)
	}
	return o, nil
}

// soffice runs LibreOffice with args in a process group of its own, which
// is killed whole when ctx ends, when the run ends (LibreOffice's helpers
// must not outlive it) and on close. It returns soffice's output.
func (o *office) soffice(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, o.exe, args...)
	cmd.Env = append(os.Environ(), "HOME="+o.home, "TMPDIR="+o.dir)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Pdeathsig fires when the thread that started the process ends, so
	// the thread stays this goroutine's until the process is waited for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = officeWaitDelay

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Started under the lock, so that close either sees the process or
	// prevents it.
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return "", errOfficeClosed
	}
	if err := cmd.Start(); err != nil {
		o.mu.Unlock()
		return "", err
	}
	done := make(chan struct{})
	o.running, o.done = cmd, done
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.running, o.done = nil, nil
		o.mu.Unlock()
		close(done)
	}()
	err := cmd.Wait()
	_ = killGroup(cmd) // what soffice started and left behind
	o.mu.Lock()
	closed := o.closed
	o.mu.Unlock()
	if closed {
		return out.String(), errOfficeClosed
	}
	if ctx.Err() != nil {
		return out.String(), ctx.Err()
	}
	return out.String(), err
}

var errOfficeClosed = errors.New("the runner is shutting down")

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// convert converts the job's main input to PDF.
func (o *office) convert(ctx context.Context, j *job, in *os.Root, outDir string) (*jobspec.Result, error) {
	if err := sniffOffice(in, j.main); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(o.dir, "job-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	// LibreOffice reads a copy, taken through the input directory's
	// os.Root: it then cannot be led out of the inputs by a symbolic link,
	// and leaves its lock files in the work directory.
	src := filepath.Join(work, "in", path.Base(j.main))
	if err := copyInput(in, j.main, src); err != nil {
		return nil, err
	}
	outTmp := filepath.Join(work, "out")
	if err := os.Mkdir(outTmp, 0o700); err != nil {
		return nil, err
	}
	t0 := time.Now()
	log, err := o.soffice(ctx, "--headless", "--norestore", "--nolockcheck", "--nodefault",
		"-env:UserInstallation="+o.profile, "--convert-to", "pdf", "--outdir", outTmp, src)
	switch {
	case errors.Is(err, errOfficeClosed):
		return nil, fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	o.log.DebugContext(ctx, "soffice ran", "main", j.main, "duration_ms", time.Since(t0).Milliseconds(), "err", err, "output", log)
	pdfPath := filepath.Join(outTmp, strings.TrimSuffix(path.Base(j.main), path.Ext(j.main))+".pdf")
	f, oerr := os.Open(pdfPath)
	if oerr != nil {
		// LibreOffice exits 0 without output for a document it cannot read.
		if err != nil {
			o.log.InfoContext(ctx, "soffice failed", "main", j.main, "err", err, "output", log)
		}
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "LibreOffice could not convert %s", j.main)
	}
	defer f.Close()
	out, err := createOutput(outDir, resultPDF)
	if err != nil {
		return nil, err
	}
	defer out.abort()
	if _, err := io.Copy(out, f); err != nil {
		return nil, fmt.Errorf("writing the PDF: %w", err)
	}
	if err := out.commit(); err != nil {
		return nil, err
	}
	return &jobspec.Result{Outputs: []jobspec.Output{{Name: resultPDF, MIME: "application/pdf", Pages: out.pdfPages()}}}, nil
}

// copyInput copies the input name to dst.
func copyInput(in *os.Root, name, dst string) error {
	src, err := in.Open(name)
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return fmt.Errorf("copying %s: %w", name, err)
	}
	return f.Close()
}

// Signatures of office formats.
var (
	zipMagic  = []byte("PK\x03\x04")
	ole2Magic = []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1")
	rtfMagic  = []byte(`{\rtf`)
)

// sniffOffice checks that the input is what its extension says. LibreOffice
// falls back to importing anything as plain text, so a corrupt .docx
// would otherwise come out as pages of garbage rather than as an error.
func sniffOffice(in *os.Root, name string) error {
	f, err := in.Open(name)
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	ext := strings.ToLower(path.Ext(name))
	bad := func(what string) error {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "LibreOffice could not convert %s: it is not %s", name, what)
	}
	switch ext {
	case ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp":
		want, what := "[Content_Types].xml", "an Office Open XML package"
		if strings.HasPrefix(ext, ".od") {
			want, what = "mimetype", "an OpenDocument package"
		}
		if !bytes.HasPrefix(head, zipMagic) {
			return bad(what)
		}
		zr, err := zip.NewReader(f, fi.Size())
		if err != nil {
			return bad(what)
		}
		for _, zf := range zr.File {
			if zf.Name == want {
				return nil
			}
		}
		return bad(what)
	case ".doc", ".xls", ".ppt":
		// Binary Office files, or RTF, HTML or XML saved under their names
		// (as many programs export spreadsheets).
		t := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xEF\xBB\xBF")), " \t\r\n")
		if bytes.HasPrefix(head, ole2Magic) || bytes.HasPrefix(t, rtfMagic) || bytes.HasPrefix(t, []byte("<")) {
			return nil
		}
		return bad("a Microsoft Office document")
	case ".rtf":
		if !bytes.HasPrefix(bytes.TrimPrefix(head, []byte("\xEF\xBB\xBF")), rtfMagic) {
			return bad("an RTF document")
		}
	}
	return nil
}

// close kills any conversion, waits for it, and removes the profile.
func (o *office) close() {
	o.mu.Lock()
	o.closed = true
	cmd, done := o.running, o.done
	o.mu.Unlock()
	if cmd != nil {
		_ = killGroup(cmd)
		select {
		case <-done:
		case <-time.After(officeWaitDelay + time.Second):
			o.log.Warn("soffice did not exit after SIGKILL")
		}
	}
	_ = os.RemoveAll(o.dir)
}

// limitedBuffer keeps the first maxOfficeLog bytes written to it.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxOfficeLog - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
