package runner

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/jobspec"
)

// siteHost is the origin a job's inputs are served at:
// http://berth.job/<path> is <InputDir>/<path>.
const siteHost = "berth.job"

// Bounds of serving and reporting.
const (
	maxServedFile = 64 << 20 // one input, served whole in one CDP message
	maxBlocked    = 100
)

// site serves one job's inputs to its page and refuses every other
// request, noting what it refused.
type site struct {
	root *os.Root
	// files are inputs made by the runner (Markdown's HTML), by path.
	files map[string]memFile
	// mainFrame is the job's tab: its navigation away from berth.job is
	// answered 204 No Content, so the page stays what it was.
	mainFrame cdp.FrameID
	// web lets requests through to the network (a URL action in a web
	// runtime, whose sandbox's egress policy decides): http and https,
	// never the sandbox's own loopback.
	web bool

	// mu guards blocked and seen.
	mu      sync.Mutex
	blocked []string
	seen    map[string]bool
}

type memFile struct {
	body  []byte
	ctype string
}

func newSite(root *os.Root, mainFrame cdp.FrameID) *site {
	return &site{root: root, mainFrame: mainFrame, files: map[string]memFile{}, seen: map[string]bool{}}
}

// siteURL is the URL of an input.
func siteURL(name string) string {
	return (&url.URL{Scheme: "http", Host: siteHost, Path: "/" + name}).String()
}

// block notes a refused request (at most maxBlocked distinct URLs).
func (s *site) block(raw string) {
	u := browser.RedactURL(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[u] || len(s.blocked) >= maxBlocked {
		return
	}
	s.seen[u] = true
	s.blocked = append(s.blocked, u)
}

// refused returns the URLs refused so far.
func (s *site) refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.blocked...)
}

// answer serves or refuses a paused request.
func (s *site) answer(ctx context.Context, ev fetch.EventRequestPaused) error {
	u, err := url.Parse(ev.Request.URL)
	if err == nil && u.Scheme == "http" && u.Host == siteHost && u.User == nil {
		status, hdr, body := s.serve(ev.Request.Method, u.Path)
		_, err := chromedp.CallBrowser(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: ev.RequestID, ResponseCode: int64(status), ResponseHeaders: hdr, Body: body})
		return err
	}
	if s.web && err == nil && (u.Scheme == "http" || u.Scheme == "https") && !jobspec.Loopback(u.Hostname()) {
		_, err := chromedp.CallBrowser(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		return err
	}
	s.block(ev.Request.URL)
	if ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == s.mainFrame {
		// Failing a navigation would put an error page in place of the
		// job's page; "no content" keeps the page as it is.
		_, err := chromedp.CallBrowser(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: ev.RequestID, ResponseCode: http.StatusNoContent})
		return err
	}
	_, err = chromedp.CallBrowser(ctx, fetch.FailRequest, fetch.FailRequestParams{
		RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
	return err
}

// serve answers a request for berth.job's path p from the inputs, opened
// through the input directory's os.Root so that no symbolic link or ".."
// leads out of it.
func (s *site) serve(method, p string) (int, []*fetch.HeaderEntry, []byte) {
	if method != http.MethodGet && method != http.MethodHead {
		return http.StatusMethodNotAllowed, plainHeaders(), nil
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	if name == "" {
		return http.StatusNotFound, plainHeaders(), nil
	}
	var body []byte
	ctype := contentType(name)
	if mf, ok := s.files[name]; ok {
		body, ctype = mf.body, mf.ctype
	} else {
		b, status := s.read(name)
		if status != http.StatusOK {
			return status, plainHeaders(), nil
		}
		body = b
	}
	hdr := []*fetch.HeaderEntry{
		{Name: "Content-Type", Value: ctype},
		// Tabs share the browser's cache; the next job's inputs may differ.
		{Name: "Cache-Control", Value: "no-store"},
		{Name: "X-Content-Type-Options", Value: "nosniff"},
	}
	if method == http.MethodHead {
		body = nil
	}
	return http.StatusOK, hdr, body
}

func (s *site) read(name string) ([]byte, int) {
	f, err := s.root.Open(name)
	if err != nil {
		return nil, http.StatusNotFound
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil || !fi.Mode().IsRegular():
		return nil, http.StatusNotFound
	case fi.Size() > maxServedFile:
		return nil, http.StatusRequestEntityTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, maxServedFile+1))
	if err != nil || len(b) > maxServedFile {
		return nil, http.StatusInternalServerError
	}
	return b, http.StatusOK
}

func plainHeaders() []*fetch.HeaderEntry {
	return []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}, {Name: "Cache-Control", Value: "no-store"}}
}

// contentTypes are the types of common web inputs, fixed here rather than
// taken from the sandbox's /etc/mime.types, which may not exist.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".xhtml": "application/xhtml+xml", ".css": "text/css; charset=utf-8",
	".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".json": "application/json", ".map": "application/json", ".xml": "application/xml",
	".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".csv": "text/csv; charset=utf-8",
	".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".avif": "image/avif", ".ico": "image/x-icon", ".bmp": "image/bmp",
	".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
	".wasm": "application/wasm", ".pdf": "application/pdf",
	".mp4": "video/mp4", ".webm": "video/webm", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".ogg": "audio/ogg",
}

func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
