package wire

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// InProcess is an http.RoundTripper that serves each request with Handler
// in this process, with no socket between: a client built on it goes
// through exactly the handler chain (authentication, scopes, tenancy,
// audit, limits) that a remote client meets. The daemon's own MCP endpoint
// and method API call its REST routes this way.
//
// The response streams: RoundTrip returns once the handler has written its
// header (or returned), and the body is read as the handler writes it, so
// server-sent events pass through. Closing the body early, or the request's
// context ending, cancels the handler's context. WebSocket upgrades are not
// supported (the handler sees a ResponseWriter that cannot hijack).
type InProcess struct {
	Handler http.Handler
	// RemoteAddr is the address the handler sees the request come from
	// (the outer request's, so rate limits and the audit log name the
	// real caller).
	RemoteAddr string
	// Context, if set, derives the context the handler sees from the
	// request's (to mark it as the inner request of an outer one).
	Context func(context.Context) context.Context
}

// RoundTrip implements http.RoundTripper.
func (t InProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sctx := ctx
	if t.Context != nil {
		sctx = t.Context(ctx)
	}
	sreq := req.Clone(sctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = t.RemoteAddr
	sreq.Host = req.URL.Host
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	} else if sreq.ContentLength == 0 && sreq.Body != http.NoBody {
		// A client request's 0 with a body means "unknown" (a reader
		// NewRequest cannot measure); a server request says that with -1,
		// and handlers (httputil.ReverseProxy) drop a body of length 0.
		sreq.ContentLength = -1
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				w.setHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("in-process handler panicked: %v", v))
				return
			}
			w.setHeader(http.StatusOK)
			pw.Close()
		}()
		t.Handler.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, ContentLength: -1, Request: req,
		Body: &cancelOnClose{ReadCloser: pr, cancel: cancel},
	}, nil
}

// pipeResponse is the handler's side of an in-process response.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header // the header as it was when written
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) { w.setHeader(status) }

func (w *pipeResponse) setHeader(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.setHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush implements http.Flusher: the pipe hands each write to the reader as
// it happens, so there is nothing to flush.
func (w *pipeResponse) Flush() { w.setHeader(http.StatusOK) }

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
