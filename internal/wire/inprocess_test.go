package wire

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type ctxKey struct{}

func TestInProcessStreamsAndMarks(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.RemoteAddr != "192.0.2.1:5" || r.Context().Value(ctxKey{}) != "outer" || r.URL.Path != "/a" || r.Host != "berth" {
			http.Error(w, "wrong request", http.StatusTeapot)
			return
		}
		w.Header().Set("X-One", "1")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second")
	})
	hc := &http.Client{Transport: InProcess{Handler: h, RemoteAddr: "192.0.2.1:5",
		Context: func(ctx context.Context) context.Context { return context.WithValue(ctx, ctxKey{}, "outer") }}}
	resp, err := hc.Get("http://berth/a")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The header and the first write arrive before the handler ends.
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-One") != "1" {
		t.Fatalf("%s %v", resp.Status, resp.Header)
	}
	buf := make([]byte, len("first "))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first " {
		t.Fatalf("first write: %q %v", buf, err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "second" {
		t.Fatalf("rest: %q %v", rest, err)
	}
}

func TestInProcessCloseCancelsAndPanicFails(t *testing.T) {
	canceled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			_, _ = io.WriteString(w, "partial")
			panic("boom")
		}
		_, _ = io.WriteString(w, "x")
		<-r.Context().Done()
		close(canceled)
	})
	hc := &http.Client{Transport: InProcess{Handler: h}}
	resp, err := hc.Get("http://berth/wait")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the body did not cancel the handler")
	}
	resp, err = hc.Get("http://berth/panic")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("reading a panicked handler's answer: %v", err)
	}
}
