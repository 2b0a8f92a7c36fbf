package runner

import (
	"errors"
	"net/http"

	"github.com/chromedp/chromedp"
)

// waitTrue evaluates expr in the page until it is true; an expression
// that throws is the options' fault.
func (p *pageRun) waitTrue(expr string) error {
	for {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		var ee *chromedp.ExceptionError
		if errors.As(err, &ee) {
			return fail(http.StatusUnprocessableEntity, "invalid_options", "options.wait_for_expression: %s", ee.Error())
		}
		if err == nil {
			err = sleep(p.ctx, pollInterval)
		}
		if err != nil {
			return err
		}
	}
}
