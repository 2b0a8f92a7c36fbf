// Package runner does one sandbox job's work inside its sandbox: it is
// `berth runner`, a small HTTP server on the sandbox's own loopback that the
// daemon calls through the agent's port proxy.
//
// A browser-profile runner keeps one headless Chromium running, with a
// blank tab made ahead, so a job starts without waiting for a browser or a
// tab; each job gets a tab of its own, closed after it. Every request a
// page makes is intercepted: http://berth.job/<path> is served from the
// input directory, anything else is refused and reported. An office-profile
// runner starts LibreOffice headless, listening on a pipe, and a converter
// connected to it through UNO, before its job arrives: a job only loads its
// document and exports the PDF.
//
// The runner does one job at a time. Failures are jobspec.Failure values:
// 4xx for deterministic ones (the same job would fail again), 5xx for
// retryable ones.
package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/jobspec"
)

// Config configures a Runner.
type Config struct {
	Profile             string // jobspec.ProfileBrowser, ProfileWeb, ProfileOffice or ProfilePDF
	InputDir, OutputDir string // default jobspec.InputDir and jobspec.OutputDir
	// Chromium is the browser; "" finds chromium-headless-shell,
	// /usr/lib/chromium/chromium-headless-shell, then chromium.
	Chromium string
	// Soffice is LibreOffice's soffice; "" finds it on PATH.
	Soffice string
	// Python is the Python with LibreOffice's UNO bindings (python3-uno)
	// that runs the office converter; "" is /usr/bin/python3.
	Python string
	// Jobs is how many jobs the runtime serves (the daemon's
	// --job-runtime-reuse); 0 is 1. A runtime that serves one job runs
	// Chromium as one process.
	Jobs   int
	Logger *slog.Logger
}

// Defaults and bounds.
const (
	DefaultTimeout = 300 * time.Second
	maxRequestBody = 1 << 20
	startTimeout   = 60 * time.Second
)

// Output names.
const (
	resultPDF  = "result.pdf"
	resultPNG  = "result.png"
	resultPPTX = "result.pptx"
)

// Runner runs jobs. Its methods are safe for concurrent use; Handler
// refuses a second job while one runs.
type Runner struct {
	cfg Config
	log *slog.Logger

	// busy is held by the job in progress: a second one gets 409.
	busy sync.Mutex
	// running mirrors busy, for reading without taking it.
	running atomic.Bool

	// mu guards the fields below. health holds it while it takes
	// chrome.crashMu: mu first.
	mu      sync.Mutex
	started bool     // Start was called
	ready   bool     // Start finished
	closed  bool     // Close was called
	chrome  *chrome  // browser profile, after Start
	office  *office  // office profile, after Start
	pdf     pdfTools // pdf profile
	version string   // Chromium's version, once up

	// settled is closed when Start has ended, either way, or Stop was
	// called: a health check that waits for readiness waits for it.
	settled    chan struct{}
	settleOnce sync.Once
}

func (r *Runner) settle() { r.settleOnce.Do(func() { close(r.settled) }) }

// New returns a Runner for cfg. It starts nothing: see Start.
func New(cfg Config) (*Runner, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.InputDir == "" {
		cfg.InputDir = jobspec.InputDir
	}
	if cfg.OutputDir == "" {
		cfg.OutputDir = jobspec.OutputDir
	}
	switch cfg.Profile {
	case jobspec.ProfileBrowser, jobspec.ProfileWeb:
		if cfg.Chromium == "" {
			cfg.Chromium = browser.FindChromium()
		}
		if cfg.Chromium == "" {
			return nil, errors.New("no Chromium found: install chromium-headless-shell or pass its path")
		}
	case jobspec.ProfileOffice:
		if cfg.Soffice == "" {
			cfg.Soffice = findCommand("soffice")
		}
		if cfg.Soffice == "" {
			return nil, errors.New("no soffice found: install LibreOffice or pass its path")
		}
		if cfg.Python == "" {
			cfg.Python = defaultPython
		}
	case jobspec.ProfilePDF:
		t, err := findPDFTools()
		if err != nil {
			return nil, err
		}
		return &Runner{cfg: cfg, log: cfg.Logger, pdf: t, settled: make(chan struct{})}, nil
	default:
		return nil, fmt.Errorf("profile %q: must be %s, %s, %s or %s", cfg.Profile, jobspec.ProfileBrowser, jobspec.ProfileWeb,
			jobspec.ProfileOffice, jobspec.ProfilePDF)
	}
	return &Runner{cfg: cfg, log: cfg.Logger, settled: make(chan struct{})}, nil
}

func findCommand(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// Start gets the profile's program ready: Chromium with a blank tab, or a
// warm LibreOffice user profile. It returns when that is done, or when ctx
// ends; /healthz answers 503 until then. What Start starts lives until
// Stop, not until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.closed || r.started {
		r.mu.Unlock()
		return errors.New("runner: Start called twice or after Stop")
	}
	r.started = true
	r.mu.Unlock()
	defer r.settle()
	t0 := time.Now()
	switch r.cfg.Profile {
	case jobspec.ProfileBrowser, jobspec.ProfileWeb:
		web := r.cfg.Profile == jobspec.ProfileWeb
		c, err := startChrome(ctx, r.cfg.Chromium, r.cfg.Jobs <= 1 || web, web, r.log)
		if err != nil {
			return fmt.Errorf("starting Chromium: %w", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			c.close()
			return errors.New("runner: stopped while starting")
		}
		r.chrome, r.version, r.ready = c, c.version, true
		r.log.InfoContext(ctx, "runner ready", "profile", r.cfg.Profile, "chromium", c.version, "pid", c.pid,
			"start_ms", time.Since(t0).Milliseconds())
	case jobspec.ProfilePDF:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return errors.New("runner: stopped while starting")
		}
		r.ready = true // qpdf and exiftool start with each job
	case jobspec.ProfileOffice:
		o, err := startOffice(ctx, r.cfg.Soffice, r.cfg.Python, r.log)
		if err != nil {
			return fmt.Errorf("warming LibreOffice: %w", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			o.close()
			return errors.New("runner: stopped while starting")
		}
		r.office, r.ready = o, true
		r.log.InfoContext(ctx, "runner ready", "profile", r.cfg.Profile, "soffice", r.cfg.Soffice,
			"start_ms", time.Since(t0).Milliseconds())
	}
	return nil
}

// Stop ends Chromium or any LibreOffice conversion, and waits for their
// processes. A job in progress fails.
func (r *Runner) Stop(context.Context) error {
	r.mu.Lock()
	r.closed, r.ready = true, false
	r.settle()
	c, o := r.chrome, r.office
	r.chrome, r.office = nil, nil
	r.mu.Unlock()
	if c != nil {
		c.close()
	}
	if o != nil {
		o.close()
	}
	return nil
}

// Handler serves the runner API: GET /healthz and POST /run.
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", r.handleHealth)
	mux.HandleFunc("POST /run", r.handleRun)
	return mux
}

// health reports the runner's state, and whether it can take a job.
func (r *Runner) health() (jobspec.Health, error) {
	h := jobspec.Health{RunnerAPI: jobspec.RunnerAPI, Profile: r.cfg.Profile}
	if r.cfg.Profile == jobspec.ProfileOffice {
		h.Office = r.cfg.Soffice
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h.Chromium = r.version
	switch {
	case r.closed:
		return h, &failure{status: http.StatusServiceUnavailable, f: jobspec.Failure{Reason: "closed", Message: "the runner is shutting down", Retryable: true}}
	case !r.ready:
		return h, &failure{status: http.StatusServiceUnavailable, f: jobspec.Failure{Reason: "starting", Message: "the runner is starting", Retryable: true}}
	case r.chrome != nil && r.chrome.lostReason() != "":
		return h, browserCrashed(r.chrome.lostReason())
	case r.office != nil && r.office.lostReason() != "":
		return h, officeLost(r.office.lostReason())
	}
	return h, nil
}

// maxHealthWait bounds GET /healthz?wait=MS.
const maxHealthWait = 60 * time.Second

// handleHealth answers the runner's health. With ?wait=MS a runner that
// is still starting answers once it is ready (or has failed), or when MS
// have passed: the daemon asks once instead of polling while Chromium or
// LibreOffice starts, which cost CPU in the sandbox and in the daemon.
func (r *Runner) handleHealth(w http.ResponseWriter, req *http.Request) {
	if ms, err := strconv.Atoi(req.URL.Query().Get("wait")); err == nil && ms > 0 {
		t := time.NewTimer(min(time.Duration(ms)*time.Millisecond, maxHealthWait))
		select {
		case <-r.settled:
		case <-t.C:
		case <-req.Context().Done():
		}
		t.Stop()
	}
	h, err := r.health()
	status := http.StatusOK
	if err != nil {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

func (r *Runner) handleRun(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	if _, err := r.health(); err != nil {
		r.writeFailure(ctx, w, err)
		return
	}
	if !r.busy.TryLock() {
		r.writeFailure(ctx, w, &failure{status: http.StatusConflict,
			f: jobspec.Failure{Reason: "busy", Message: "the runner is doing another job; it does one at a time", Retryable: true}})
		return
	}
	r.running.Store(true)
	defer func() {
		r.running.Store(false)
		r.busy.Unlock()
	}()

	t0 := time.Now()
	j, err := r.parse(req)
	if err != nil {
		r.writeFailure(ctx, w, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	res, err := r.run(ctx, j)
	if err != nil {
		err = classify(ctx, err, j.timeout)
		var f *failure
		errors.As(err, &f)
		level := slog.LevelInfo // the job's own fault
		if f.status >= 500 {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "job failed", "action", j.action, "main", j.main, "reason", f.f.Reason, "status", f.status,
			"duration_ms", time.Since(t0).Milliseconds(), "message", f.f.Message, "err", f.cause)
		r.writeFailure(ctx, w, err)
		return
	}
	r.log.InfoContext(ctx, "job done", "action", j.action, "main", j.main, "outputs", len(res.Outputs),
		"blocked", len(res.Blocked), "duration_ms", time.Since(t0).Milliseconds())
	writeJSON(w, http.StatusOK, res)
}

// job is a checked Request.
type job struct {
	action  string
	main    string // "" until resolved (markdown-pdf, office-pdf)
	opts    jobspec.Options
	timeout time.Duration
	schema  jobspec.InputSchema
}

// wireRequest is jobspec.Request with the options kept raw, for
// jobspec.ParseOptions to decode strictly.
type wireRequest struct {
	Action    string          `json:"action"`
	Main      string          `json:"main"`
	Options   json.RawMessage `json:"options"`
	TimeoutMS int64           `json:"timeout_ms"`
}

func (r *Runner) parse(req *http.Request) (*job, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, maxRequestBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fail(http.StatusRequestEntityTooLarge, "invalid_input", "the request body is more than %d bytes", maxRequestBody)
	case err != nil:
		return nil, fail(http.StatusBadRequest, "invalid_input", "reading the request: %v", err)
	}
	var wr wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wr); err != nil {
		return nil, fail(http.StatusBadRequest, "invalid_input", "the request is not a runner request: %v", err)
	}
	a, ok := jobspec.Builtin(wr.Action)
	if !ok {
		return nil, fail(http.StatusUnprocessableEntity, "unknown_action", "action %q is not a built-in action", wr.Action)
	}
	if a.Profile != r.cfg.Profile {
		return nil, fail(http.StatusUnprocessableEntity, "wrong_profile", "action %s needs a %s runner; this one is %s", a.Name, a.Profile, r.cfg.Profile)
	}
	opts, err := jobspec.ParseOptions(wr.Options)
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_options", "%v", err)
	}
	if p := opts.Validate(a.Name); len(p) > 0 {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_options", "%s", problems(p))
	}
	if wr.TimeoutMS < 0 {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_options", "timeout_ms: must not be negative")
	}
	j := &job{action: a.Name, opts: opts, timeout: DefaultTimeout, schema: a.Inputs,
		main: firstNonEmpty(wr.Main, opts.Main)}
	if wr.TimeoutMS > 0 {
		j.timeout = time.Duration(wr.TimeoutMS) * time.Millisecond
	}
	if j.main != "" {
		if err := jobspec.CheckName(j.main); err != nil {
			return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "main: %v", err)
		}
	}
	if a.Name == jobspec.HTMLPPTX {
		// The slide size must be one PowerPoint takes.
		for field, v := range map[string]int{"width": opts.Width, "height": opts.Height} {
			if v != 0 && (v < minSlidePx || v > maxSlidePx) {
				return nil, fail(http.StatusUnprocessableEntity, "invalid_options",
					"options.%s: a slide must be between %d and %d pixels", field, minSlidePx, maxSlidePx)
			}
		}
	}
	return j, nil
}

// problems renders Validate's problems in a stable order.
func problems(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", k, p[k])
	}
	return b.String()
}

// run does a checked job.
func (r *Runner) run(ctx context.Context, j *job) (*jobspec.Result, error) {
	web := jobspec.IsURLAction(j.action)
	if web {
		// A URL action has no inputs, so nothing made the directory.
		if err := os.MkdirAll(r.cfg.InputDir, 0o755); err != nil {
			return nil, fail(http.StatusServiceUnavailable, "render_failed", "the input directory cannot be made: %v", err)
		}
	}
	in, err := os.OpenRoot(r.cfg.InputDir)
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "the input directory cannot be opened: %v", err)
	}
	defer in.Close()
	if r.cfg.Profile == jobspec.ProfilePDF {
		return r.pdf.engine(ctx, j, in, r.cfg.InputDir, r.cfg.OutputDir)
	}
	if !web {
		if err := j.resolveMain(in); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(r.cfg.OutputDir, 0o755); err != nil {
		return nil, fail(http.StatusServiceUnavailable, "render_failed", "the output directory cannot be made: %v", err)
	}
	r.mu.Lock()
	c, o := r.chrome, r.office
	r.mu.Unlock()
	switch j.action {
	case jobspec.HTMLPDF, jobspec.HTMLPNG, jobspec.HTMLPPTX, jobspec.MarkdownPDF, jobspec.URLPDF, jobspec.URLPNG:
		if c == nil {
			return nil, fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
		}
		return c.render(ctx, j, in, r.cfg.OutputDir)
	case jobspec.OfficePDF:
		if o == nil {
			return nil, fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
		}
		return o.convert(ctx, j, in, r.cfg.OutputDir)
	}
	return nil, fail(http.StatusUnprocessableEntity, "unknown_action", "action %q is not supported", j.action)
}

// resolveMain picks the main input, when the request names none, and
// checks it: it exists, is a regular file, and has one of the action's
// extensions.
func (j *job) resolveMain(in *os.Root) error {
	if j.main == "" && j.schema.Main != "" {
		j.main = j.schema.Main
	}
	if j.main == "" {
		var found []string
		_ = fsWalk(in, ".", 0, func(name string) bool {
			if j.action == jobspec.OfficePDF || slices.Contains(j.schema.Extensions, strings.ToLower(path.Ext(name))) {
				found = append(found, name)
			}
			return len(found) < 2
		})
		switch len(found) {
		case 0:
			return fail(http.StatusUnprocessableEntity, "invalid_input", "no input to convert: give one with a %s extension",
				strings.Join(j.schema.Extensions, ", "))
		case 1:
			j.main = found[0]
		default:
			return fail(http.StatusUnprocessableEntity, "invalid_input", "several inputs could be the main one; name it with options.main")
		}
	}
	if ext := strings.ToLower(path.Ext(j.main)); !slices.Contains(j.schema.Extensions, ext) {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "%s: %s takes %s inputs",
			j.main, j.action, strings.Join(j.schema.Extensions, ", "))
	}
	fi, err := in.Stat(j.main)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s does not exist", j.main)
	case err != nil:
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", j.main, err)
	case !fi.Mode().IsRegular():
		return fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s is not a regular file", j.main)
	}
	return nil
}

// fsWalk calls fn for the regular files under dir in in, in name order,
// until fn returns false. It skips hidden files and does not follow
// symbolic links.
func fsWalk(in *os.Root, dir string, depth int, fn func(name string) bool) bool {
	if depth > 16 {
		return true
	}
	f, err := in.Open(dir)
	if err != nil {
		return true
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return true
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // .DS_Store and the like are nobody's main input
		}
		name := path.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular():
			if !fn(name) {
				return false
			}
		case e.IsDir():
			if !fsWalk(in, name, depth+1, fn) {
				return false
			}
		}
	}
	return true
}

// failure is a job's failure as the runner answers it.
type failure struct {
	status int
	f      jobspec.Failure
	cause  error // logged, not answered
}

func (e *failure) Error() string { return e.f.Reason + ": " + e.f.Message }
func (e *failure) Unwrap() error { return e.cause }

// fail returns a failure; 5xx statuses are retryable.
func fail(status int, reason, format string, args ...any) *failure {
	return &failure{status: status, f: jobspec.Failure{Reason: reason, Message: fmt.Sprintf(format, args...), Retryable: status >= 500}}
}

func browserCrashed(why string) *failure {
	return fail(http.StatusServiceUnavailable, "browser_crashed", "Chromium is gone (%s); the runner cannot do more jobs", why)
}

// classify turns any error of a job into a failure: a failure stays as it
// is, the job's deadline is a timeout, anything else is a retryable
// render failure.
func classify(ctx context.Context, err error, timeout time.Duration) error {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &failure{status: http.StatusGatewayTimeout, cause: err,
			f: jobspec.Failure{Reason: "timeout", Message: fmt.Sprintf("the job did not finish within %s", timeout), Retryable: true}}
	case errors.Is(err, context.Canceled):
		return &failure{status: http.StatusServiceUnavailable, cause: err,
			f: jobspec.Failure{Reason: "canceled", Message: "the job was canceled", Retryable: true}}
	}
	return &failure{status: http.StatusInternalServerError, cause: err,
		f: jobspec.Failure{Reason: "render_failed", Message: "rendering failed: " + err.Error(), Retryable: true}}
}

func (r *Runner) writeFailure(ctx context.Context, w http.ResponseWriter, err error) {
	var f *failure
	if !errors.As(err, &f) {
		f = classify(ctx, err, 0).(*failure)
	}
	writeJSON(w, f.status, f.f)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// output is an output file being written: a temporary file in the output
// directory, renamed into place by commit, so a reader never sees half a
// file under the output's name.
type output struct {
	f    *os.File
	dir  string
	name string
}

func createOutput(dir, name string) (*output, error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	return &output{f: f, dir: dir, name: name}, nil
}

func (o *output) Write(b []byte) (int, error) { return o.f.Write(b) }

// commit syncs the file, renames it into place and syncs the directory.
func (o *output) commit() error {
	if err := o.f.Chmod(0o644); err != nil {
		o.abort()
		return err
	}
	if err := o.f.Sync(); err != nil {
		o.abort()
		return fmt.Errorf("syncing %s: %w", o.name, err)
	}
	if err := o.f.Close(); err != nil {
		_ = os.Remove(o.f.Name())
		return fmt.Errorf("writing %s: %w", o.name, err)
	}
	if err := os.Rename(o.f.Name(), filepath.Join(o.dir, o.name)); err != nil {
		_ = os.Remove(o.f.Name())
		return fmt.Errorf("renaming %s: %w", o.name, err)
	}
	if d, err := os.Open(o.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// abort removes the unfinished file; after commit it does nothing.
func (o *output) abort() {
	if o.f.Close() == nil {
		_ = os.Remove(o.f.Name())
	}
}

// pdfPages counts the pages of the committed PDF the way the daemon
// does when it validates it (docfmt); 0 when it cannot tell.
func (o *output) pdfPages() int {
	f, err := os.Open(filepath.Join(o.dir, o.name))
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	n, err := docfmt.PDF(f, fi.Size())
	if err != nil {
		return 0
	}
	return n
}
