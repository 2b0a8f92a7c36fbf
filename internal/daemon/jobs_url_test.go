package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobURL: url-pdf and url-png render a page from the network in a
// fresh sandbox with egress, through the daemon's egress policy: a page
// of the test internet is rendered (the positive control of every
// refusal), a redirect to the metadata address is refused by the policy
// (url_blocked), a name that resolves to it reaches nothing
// (url_unreachable), an error status fails the job (url_status) unless
// the job accepts it, the sandbox's own loopback is refused at submit and
// as the page's subresource, and the Gotenberg url routes answer as
// Gotenberg does.
func TestJobURL(t *testing.T) {
	needJobs(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, in.Apply)
	ctx := context.Background()
	urlJob := func(t *testing.T, action string, opts map[string]any) apitype.Job {
		t.Helper()
		raw, _ := json.Marshal(opts)
		return runJob(t, d.Client, apitype.CreateJobRequest{Action: action, Options: raw})
	}
	wantFailed := func(t *testing.T, j apitype.Job, reason string) {
		t.Helper()
		if j.State != apitype.JobFailed || j.Error == nil || j.Error.Reason != reason {
			t.Fatalf("job %s: %s, error %+v; want failed with %s", j.ID, j.State, j.Error, reason)
		}
	}
	page := func(body string) string {
		return "http://www.test.example/html?body=" + url.QueryEscape(body)
	}

	t.Run("pdf", func(t *testing.T) {
		// The page also asks for the sandbox's loopback, where its runner
		// listens: refused, and reported.
		j := urlJob(t, "url-pdf", map[string]any{"url": page(`<h1>A page from the network</h1>` +
			`<img src="http://127.0.0.1:7777/healthz"><img src="http://localhost:7777/x">`), "paper": "A4"})
		p := output(t, d.Client, j, t.TempDir())
		if txt := pdfText(t, p); !strings.Contains(txt, "A page from the network") {
			t.Errorf("the PDF's text is %q, want the page's", txt)
		}
		if !slices.ContainsFunc(j.Blocked, func(u string) bool { return strings.HasPrefix(u, "http://127.0.0.1:7777/") }) {
			t.Errorf("blocked = %v, want the loopback image refused", j.Blocked)
		}
	})
	t.Run("png", func(t *testing.T) {
		j := urlJob(t, "url-png", map[string]any{"url": "http://www.test.example/", "width": 640, "height": 400})
		if j.State != apitype.JobSucceeded || len(j.Outputs) != 1 || j.Outputs[0].MIME != "image/png" {
			t.Fatalf("job %s: %s, outputs %+v, error %+v; want one PNG", j.ID, j.State, j.Outputs, j.Error)
		}
	})
	t.Run("redirect to the metadata address is blocked", func(t *testing.T) {
		j := urlJob(t, "url-pdf", map[string]any{"url": "http://www.test.example/redirect"})
		wantFailed(t, j, "url_blocked")
		if !strings.Contains(j.Error.Message, "169.254.169.254") {
			t.Errorf("message %q does not name the refused address", j.Error.Message)
		}
	})
	t.Run("a name of a refused address reaches nothing", func(t *testing.T) {
		wantFailed(t, urlJob(t, "url-pdf", map[string]any{"url": "http://meta.test.example/"}), "url_unreachable")
	})
	t.Run("error status", func(t *testing.T) {
		wantFailed(t, urlJob(t, "url-pdf", map[string]any{"url": "http://www.test.example/status/404"}), "url_status")
		// An error status with an empty body fails the navigation itself.
		wantFailed(t, urlJob(t, "url-pdf", map[string]any{"url": "http://www.test.example/status/503?empty=1"}), "url_status")
		j := urlJob(t, "url-pdf", map[string]any{"url": "http://www.test.example/status/404", "fail_on_http_status_codes": []int{}})
		if txt := pdfText(t, output(t, d.Client, j, t.TempDir())); !strings.Contains(txt, "status 404") {
			t.Errorf("text %q, want the 404 page rendered when the job accepts it", txt)
		}
	})
	t.Run("refused at submit", func(t *testing.T) {
		for _, req := range []apitype.CreateJobRequest{
			{Action: "url-pdf", Options: json.RawMessage(`{"url":"http://127.0.0.1:7777/run"}`)},
			{Action: "url-pdf", Options: json.RawMessage(`{"url":"file:///etc/passwd"}`)},
			{Action: "url-pdf", Options: json.RawMessage(`{"url":"http://user:secret@www.test.example/"}`)},
			{Action: "url-pdf"},
			{Action: "url-png", Options: json.RawMessage(`{"url":"http://www.test.example/"}`),
				Inputs: map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>"))}},
		} {
			if _, err := d.Client.CreateJob(ctx, req); !errcode.Is(err, errcode.Invalid) {
				t.Errorf("%s %s: %v, want invalid", req.Action, req.Options, err)
			}
		}
	})
	t.Run("gotenberg", func(t *testing.T) {
		a := gotPost(t, d, "/forms/chromium/convert/url", nil, map[string]string{"url": page("<p>Gotenberg's url route</p>"),
			"paperWidth": "8.27", "paperHeight": "11.7"}, nil)
		if txt := pdfText(t, a.want200(t, "application/pdf", "")); !strings.Contains(txt, "Gotenberg's url route") {
			t.Errorf("text %q, want the page's", txt)
		}
		gotPost(t, d, "/forms/chromium/screenshot/url", nil, map[string]string{"url": "http://www.test.example/"}, nil).
			want200(t, "image/png", "")
		gotPost(t, d, "/forms/chromium/convert/url", nil, map[string]string{"url": "http://www.test.example/status/500"}, nil).
			wantPlain(t, http.StatusConflict, `^Invalid HTTP status code`)
		gotPost(t, d, "/forms/chromium/convert/url", nil, map[string]string{"url": "http://www.test.example/redirect"}, nil).
			wantPlain(t, http.StatusForbidden, `^Forbidden: .*169\.254\.169\.254`)
		gotPost(t, d, "/forms/chromium/convert/url", nil, map[string]string{"url": "http://localhost:7777/"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'url' is invalid`)
		gotPost(t, d, "/forms/chromium/convert/url", nil, nil, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'url' is required`)
	})
}

// TestJobURLWithoutEgress: a daemon that serves no egress network reports
// the URL actions unhealthy, with the reason, and refuses their jobs
// before anything is queued; its other actions stay healthy.
func TestJobURLWithoutEgress(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.Egress.Disabled = true })
	h, err := d.Client.Action(context.Background(), "url-pdf")
	if err != nil {
		t.Fatal(err)
	}
	if h.Available || h.Reason != "PROFILE_UNHEALTHY" || !strings.Contains(h.Message, "egress") {
		t.Errorf("url-pdf health = %+v, want PROFILE_UNHEALTHY naming the egress network", h)
	}
	if h, _ := d.Client.Action(context.Background(), "html-pdf"); !h.Available {
		t.Errorf("html-pdf health = %+v, want available (the control)", h)
	}
	_, err = d.Client.CreateJob(context.Background(), apitype.CreateJobRequest{Action: "url-pdf",
		Options: json.RawMessage(`{"url":"http://www.test.example/"}`)})
	if err == nil {
		t.Error("a url-pdf job was accepted by a daemon without egress")
	}
}
