package cluster_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/store"
)

// TestServe forwards through HQ.Serve to an HTTP server that checks the
// assertion with a worker's own Verifier: what travels, the caps on
// answers, and how a failure is told (not delivered, or outcome unknown).
func TestServe(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	secret := []byte(cluster.NewSecret())
	v := cluster.NewVerifier("w1", []byte(cluster.WorkerCredential(secret, "w1")))
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := v.Verify(r); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/echo": // what arrived
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"host":"` + r.Host + `","authorization":"` + r.Header.Get("Authorization") + `","cookie":"` + r.Header.Get("Cookie") + `"}`))
		case "/big.json": // its length declared
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "2050")
			_, _ = w.Write([]byte(`"` + strings.Repeat("x", 2048) + `"`))
		case "/chunked.json": // its length learnt as it comes
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`"` + strings.Repeat("x", 1000)))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(strings.Repeat("x", 1048) + `"`))
		case "/big.bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		case "/hangup": // reads the request, then drops the connection unanswered
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	defer worker.Close()
	u, _ := url.Parse(worker.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := url.Parse("http://" + ln.Addr().String())
	ln.Close() // nothing listens there now
	hq, err := cluster.NewHQ(cluster.HQConfig{Secret: secret, Store: db, MaxJSON: 1024, MaxResponse: 4096,
		Workers: []cluster.WorkerConfig{{ID: "w1", URL: u}, {ID: "w2", URL: gone}}})
	if err != nil {
		t.Fatal(err)
	}
	defer hq.Close()
	caller := cluster.Caller{Principal: auth.Principal{KeyID: "key_1", Scope: auth.ScopeAdmin}}
	serve := func(worker cluster.WorkerConfig, method, path string, limitBody int64) (*httptest.ResponseRecorder, error) {
		r := httptest.NewRequest(method, "http://hq.example:7070"+path, strings.NewReader(strings.Repeat("b", 100)))
		r.Header.Set("Authorization", "Bearer bk_client")
		r.Header.Set("Cookie", "berth_session=s")
		rec := httptest.NewRecorder()
		if limitBody > 0 {
			r.Body = http.MaxBytesReader(rec, r.Body, limitBody)
		}
		var failed error
		hq.Serve(rec, r, cluster.Forward{Worker: worker, Caller: caller,
			Fail: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err }})
		return rec, failed
	}
	w1 := cluster.WorkerConfig{ID: "w1", URL: u}
	w2 := cluster.WorkerConfig{ID: "w2", URL: gone}

	rec, err := serve(w1, "GET", "/echo", 0)
	if err != nil || rec.Code != 200 {
		t.Fatalf("a forward = %d %s, %v", rec.Code, rec.Body, err)
	}
	if got := rec.Body.String(); got != `{"host":"hq.example:7070","authorization":"","cookie":""}` {
		t.Errorf("the worker got %s: want the client's Host and none of its credentials", got)
	}
	if _, err := serve(w1, "GET", "/big.bin", 0); err != nil {
		t.Errorf("2 KiB of bytes, under MaxResponse: %v", err)
	}
	if _, err := serve(w1, "GET", "/big.json", 0); errcode.ReasonOf(err) != "owner_outcome_unknown" {
		t.Errorf("2 KiB of JSON over MaxJSON = %v, want owner_outcome_unknown", err)
	}
	// Past the cap once the answer has begun, it is cut off there (a
	// server aborts the connection: the client never takes it whole).
	if rec, _ := serve(w1, "GET", "/chunked.json", 0); rec.Body.Len() > 1024 {
		t.Errorf("2 KiB of chunked JSON over MaxJSON reached the client: %d bytes", rec.Body.Len())
	}
	for _, method := range []string{"GET", "POST"} {
		if _, err := serve(w2, method, "/echo", 0); errcode.ReasonOf(err) != "owner_unavailable" {
			t.Errorf("%s to a worker that does not listen = %v, want owner_unavailable", method, err)
		}
	}
	if _, err := serve(w1, "GET", "/hangup", 0); errcode.ReasonOf(err) != "owner_unavailable" {
		t.Errorf("a GET the worker dropped = %v, want owner_unavailable", err)
	}
	if _, err := serve(w1, "POST", "/hangup", 0); errcode.ReasonOf(err) != "owner_outcome_unknown" {
		t.Errorf("a POST the worker dropped = %v, want owner_outcome_unknown", err)
	}
	if _, err := serve(w1, "POST", "/echo", 10); errcode.ReasonOf(err) != "body_too_large" {
		t.Errorf("a body over its cap = %v, want body_too_large", err)
	}
}
