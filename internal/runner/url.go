package runner

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/jobspec"
)

// web reports whether the job renders a page from the network.
func (p *pageRun) web() bool {
	return jobspec.IsURLAction(p.j.action)
}

// loadURL navigates to a URL action's page and waits for its load event.
// The page's own response decides: a network error, the egress policy's
// refusal (Berth answers an HTTP request it refuses with 403 and an
// X-Berth-Reason header) and a status the job fails on are the job's
// failures, each with its reason.
func (p *pageRun) loadURL() error {
	u := p.j.opts.URL
	shown := browser.RedactURL(u)
	if !p.j.opts.WaitNetworkIdle { // else already on
		if _, err := chromedp.Call(p.ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
	}
	lctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	loaded := chromedp.Events(lctx, page.LoadEventFired)
	nav, err := chromedp.Call(p.ctx, page.Navigate, page.NavigateParams{URL: u})
	if err != nil {
		return err
	}
	if nav.ErrorText != "" && !strings.Contains(nav.ErrorText, "ERR_HTTP_RESPONSE_CODE_FAILURE") {
		return fail(http.StatusUnprocessableEntity, "url_unreachable",
			"loading %s failed: %s (the egress policy answers no name it refuses, and resets connections to addresses it refuses)",
			shown, nav.ErrorText)
	}
	if nav.ErrorText == "" {
		if err := awaitLoad(p.ctx, loaded); err != nil {
			return err
		}
	}
	p.mu.Lock()
	status, text, refusal, final := p.mainStatus, p.mainStatusText, p.mainRefusal, p.mainURL
	p.mu.Unlock()
	if refusal != "" {
		if final != "" && final != u {
			shown += " (redirected to " + browser.RedactURL(final) + ")"
		}
		return fail(http.StatusUnprocessableEntity, "url_blocked", "the egress policy refused %s: %s", shown, refusal)
	}
	if status == 0 && nav.ErrorText != "" {
		return fail(http.StatusUnprocessableEntity, "url_status", "%s answered an HTTP error status with an empty page", shown)
	}
	failOn := p.j.opts.FailOnCodes() // by default every 4xx and 5xx, as Gotenberg's [499, 599]
	if failsOn(failOn, int(status)) {
		return fail(http.StatusUnprocessableEntity, "url_status", "%s answered %d %s (the job fails on %v: options.fail_on_http_status_codes)",
			shown, status, cmp.Or(text, http.StatusText(int(status))), failOn)
	}
	return nil
}

// failsOn reports whether status is among codes, where a code ending in 99
// stands for its hundred (499: 400-499).
func failsOn(codes []int, status int) bool {
	for _, c := range codes {
		if c == status || (c%100 == 99 && status/100 == c/100) {
			return true
		}
	}
	return false
}

// headerValue returns header name of a CDP response's headers, whatever
// its case.
func headerValue(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return fmt.Sprint(v)
		}
	}
	return ""
}
