package runner

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
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
	"strconv"
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

// converterScript is the UNO client that converts documents: see its
// opening comment.
//
//go:embed office_convert.py
var converterScript []byte

// defaultPython is the Python that has LibreOffice's UNO bindings
// (Debian's python3-uno installs them for the system Python only).
const defaultPython = "/usr/bin/python3"

// office converts documents with a LibreOffice started at runner start:
// soffice headless, listening on a pipe of its own, and a converter
// process (converterScript) connected to it through UNO, so that a job
// only loads its document and exports the PDF. Both run in process groups
// of their own; a job that times out or crashes LibreOffice kills both,
// and the runner then reports itself unhealthy (lost) so it is discarded.
type office struct {
	exe     string
	python  string
	log     *slog.Logger
	dir     string // under os.TempDir(): profile/, home/, the converter and the jobs' work directories
	home    string
	profile string // the user installation, as a file: URL
	pipe    string // the name of LibreOffice's UNO pipe

	soffice *officeProc
	conv    *officeProc
	stdin   io.WriteCloser
	lines   chan string // the converter's answers, closed at its end
	convLog *limitedBuffer

	// mu guards the fields below.
	mu     sync.Mutex
	closed bool
	lost   string // why LibreOffice or the converter is gone, "" while both run
}

// officeProc is a process the office started, in a process group of its
// own; done is closed once it has been waited for and its group killed.
type officeProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // after done
}

// startOffice starts LibreOffice listening and the converter, and returns
// once the converter has connected to LibreOffice through UNO.
func startOffice(ctx context.Context, exe, python string, log *slog.Logger) (*office, error) {
	dir, err := os.MkdirTemp("", "berth-office-")
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	o := &office{exe: exe, python: python, log: log, dir: dir, home: filepath.Join(dir, "home"),
		pipe: "berth-office-" + hex.EncodeToString(rnd[:]), lines: make(chan string, 4), convLog: &limitedBuffer{}}
	o.profile = (&url.URL{Scheme: "file", Path: filepath.Join(dir, "profile")}).String()
	if err := os.Mkdir(o.home, 0o700); err != nil {
		o.close()
		return nil, err
	}
	script := filepath.Join(dir, "convert.py")
	if err := os.WriteFile(script, converterScript, 0o600); err != nil {
		o.close()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, officeWarmTimeout)
	defer cancel()
	sofficeLog := &limitedBuffer{}
	o.soffice, err = o.start(ctx, "soffice", sofficeLog, nil, o.exe, "--headless", "--invisible", "--norestore",
		"--nolockcheck", "--nodefault", "--nologo", "-env:UserInstallation="+o.profile,
		"--accept=pipe,name="+o.pipe+";urp;StarOffice.ComponentContext")
	if err != nil {
		o.close()
		return nil, fmt.Errorf("starting soffice: %w", err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		o.close()
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		o.close()
		return nil, err
	}
	o.stdin = stdinW
	o.conv, err = o.start(ctx, "converter", o.convLog, func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	}, o.python, script, o.pipe, strconv.Itoa(int(officeWarmTimeout/time.Second)))
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdoutR.Close()
		o.close()
		return nil, fmt.Errorf("starting the converter (%s): %w", o.python, err)
	}
	go func() {
		defer close(o.lines)
		defer stdoutR.Close()
		sc := bufio.NewScanner(stdoutR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			o.lines <- sc.Text()
		}
	}()
	var ready struct {
		Ready   bool   `json:"ready"`
		Message string `json:"message"`
	}
	select {
	case line, ok := <-o.lines:
		if ok && json.Unmarshal([]byte(line), &ready) == nil && ready.Ready {
			return o, nil
		}
		o.close()
		return nil, fmt.Errorf("the converter did not connect to LibreOffice: %s %s; soffice: %s", ready.Message, o.convLog, sofficeLog)
	case <-o.soffice.done:
		o.close()
		return nil, fmt.Errorf("soffice exited while starting (%v): %s", o.soffice.err, sofficeLog)
	case <-wctx.Done():
		o.close()
		return nil, fmt.Errorf("LibreOffice was not ready in %s: %w", officeWarmTimeout, wctx.Err())
	}
}

// start starts a process of the office in a process group of its own,
// which is killed whole when the process ends (LibreOffice's helpers must
// not outlive it) and on close. The process lives until then, whatever
// happens to ctx.
func (o *office) start(ctx context.Context, name string, log *limitedBuffer, setup func(*exec.Cmd), argv ...string) (*officeProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+o.home, "TMPDIR="+o.dir)
	cmd.Stdout, cmd.Stderr = log, log
	if setup != nil {
		setup(cmd)
	}
	p := &officeProc{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the process ends,
		// so the thread stays this goroutine's until it is waited for.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			started <- errOfficeClosed
			return
		}
		if err := cmd.Start(); err != nil {
			o.mu.Unlock()
			started <- err
			return
		}
		o.mu.Unlock()
		started <- nil
		p.err = cmd.Wait()
		_ = killGroup(cmd) // what it started and left behind
		o.gone(fmt.Sprintf("%s exited (%v)", name, p.err))
		close(p.done)
	}()
	select {
	case err := <-started:
		if err != nil {
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		// Started or not, close cleans up: the goroutine reports soon.
		if err := <-started; err != nil {
			return nil, err
		}
		return p, nil
	}
}

// gone records that LibreOffice or the converter ended: the office can do
// no more jobs, and the runner's health says so.
func (o *office) gone(why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost == "" && !o.closed {
		o.lost = why
		o.log.Warn("the warm LibreOffice is gone", "why", why)
	}
}

// lostReason is why the office cannot do a job, or "". LibreOffice's
// launcher may outlive soffice.bin, so the office looks for soffice.bin
// itself, in the launcher's process group.
func (o *office) lostReason() string {
	o.mu.Lock()
	lost, closed := o.lost, o.closed
	o.mu.Unlock()
	if lost != "" || closed {
		return lost
	}
	if !processIn(o.soffice.cmd.Process.Pid, "soffice.bin") {
		o.gone("soffice.bin is gone")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost
}

// processIn reports whether a live (not zombie) process called comm is in
// process group pgid.
func processIn(pgid int, comm string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: the job will
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open || string(b[open+1:end]) != comm {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// kill kills LibreOffice and the converter, and waits for them.
func (o *office) kill(why string) {
	o.gone(why)
	for _, p := range []*officeProc{o.soffice, o.conv} {
		if p == nil {
			continue
		}
		_ = killGroup(p.cmd)
	}
	for _, p := range []*officeProc{o.soffice, o.conv} {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(officeWaitDelay + time.Second):
			o.log.Warn("a LibreOffice process did not exit after SIGKILL", "process", p.name)
		}
	}
}

var errOfficeClosed = errors.New("the runner is shutting down")

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

func officeLost(why string) *failure {
	return fail(http.StatusServiceUnavailable, "office_lost", "LibreOffice is gone (%s); the runner cannot do more jobs", why)
}

// convertRequest is a job for the converter (see office_convert.py).
type convertRequest struct {
	In         string         `json:"in"`
	Out        string         `json:"out"`
	CSV        bool           `json:"csv,omitempty"`
	Landscape  bool           `json:"landscape,omitempty"`
	FilterData map[string]any `json:"filter_data"`
}

// convertAnswer is the converter's answer.
type convertAnswer struct {
	OK      bool   `json:"ok"`
	Kind    string `json:"kind"`
	Error   string `json:"error"` // load, export, lost
	Message string `json:"message"`
}

// pdfVersions are LibreOffice's SelectPdfVersion values of the PDF/A
// parts jobspec.Options.PDFA names.
var pdfVersions = map[string]int{"PDF/A-1b": 1, "PDF/A-2b": 2, "PDF/A-3b": 3}

// filterData is the PDF export filter's FilterData for the job's options.
func filterData(opts jobspec.Options) map[string]any {
	fd := map[string]any{
		"Quality":          90,
		"ExportFormFields": true,
	}
	if opts.PageRanges != "" {
		fd["PageRange"] = strings.ReplaceAll(opts.PageRanges, " ", "")
	}
	if v, ok := pdfVersions[opts.PDFA]; ok {
		fd["SelectPdfVersion"] = v
	}
	if opts.PDFUA {
		fd["PDFUACompliance"] = true
	}
	if opts.ExportFormFields != nil {
		fd["ExportFormFields"] = *opts.ExportFormFields
	}
	if opts.Quality != 0 {
		fd["Quality"] = opts.Quality
	}
	if opts.SinglePageSheets {
		fd["SinglePageSheets"] = true
	}
	if opts.LosslessImageCompression {
		fd["UseLosslessCompression"] = true
	}
	if opts.ReduceImageResolution {
		fd["ReduceImageResolution"] = true
		fd["MaxImageResolution"] = 300
	}
	if opts.MaxImageResolution != 0 {
		fd["ReduceImageResolution"] = true
		fd["MaxImageResolution"] = opts.MaxImageResolution
	}
	return fd
}

// convert converts the job's main input to PDF.
func (o *office) convert(ctx context.Context, j *job, in *os.Root, outDir string) (*jobspec.Result, error) {
	if why := o.lostReason(); why != "" {
		return nil, officeLost(why)
	}
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
	pdfPath := filepath.Join(work, "out.pdf")
	req := convertRequest{
		In:         (&url.URL{Scheme: "file", Path: src}).String(),
		Out:        (&url.URL{Scheme: "file", Path: pdfPath}).String(),
		CSV:        strings.EqualFold(path.Ext(j.main), ".csv"),
		Landscape:  j.opts.Landscape,
		FilterData: filterData(j.opts),
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := o.stdin.Write(append(line, '\n')); err != nil {
		o.kill("writing to the converter: " + err.Error())
		return nil, o.crashed(j)
	}
	var ans convertAnswer
	select {
	case l, ok := <-o.lines:
		if !ok || json.Unmarshal([]byte(l), &ans) != nil {
			o.kill("the converter ended")
			return nil, o.crashed(j)
		}
	case <-o.soffice.done:
		o.kill("soffice exited during a conversion")
		return nil, o.crashed(j)
	case <-ctx.Done():
		// A document that hangs LibreOffice: nothing of it is left.
		o.kill("the job ended during a conversion")
		o.mu.Lock()
		closed := o.closed
		o.mu.Unlock()
		if closed {
			return nil, fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
		}
		return nil, ctx.Err()
	}
	o.log.DebugContext(ctx, "converted", "main", j.main, "kind", ans.Kind, "duration_ms", time.Since(t0).Milliseconds(),
		"ok", ans.OK, "error", ans.Error, "message", ans.Message)
	switch {
	case ans.OK:
	case ans.Error == "lost" || o.lostReason() != "":
		o.kill("the converter lost LibreOffice: " + ans.Message)
		return nil, o.crashed(j)
	case ans.Error == "export" && j.opts.PageRanges != "":
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input",
			"LibreOffice could not export %s to PDF with page_ranges %q (is it beyond the document's pages?)", j.main, j.opts.PageRanges)
	default:
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "LibreOffice could not convert %s", j.main)
	}
	f, err := os.Open(pdfPath)
	if err != nil {
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

// crashed is the failure of a job during which LibreOffice or the
// converter died: the runner's close, or a crash (retryable once: the
// daemon does not retry a document that crashes LibreOffice twice).
func (o *office) crashed(j *job) error {
	o.mu.Lock()
	closed := o.closed
	o.mu.Unlock()
	if closed {
		return fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
	}
	return fail(http.StatusServiceUnavailable, "office_crashed", "LibreOffice crashed converting %s", j.main)
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

// close kills LibreOffice and the converter, waits for them, and removes
// the profile.
func (o *office) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	if o.stdin != nil {
		o.stdin.Close()
	}
	o.kill("closed")
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
