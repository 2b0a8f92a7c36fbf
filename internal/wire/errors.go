// Package wire encodes and decodes Berth's HTTP wire format: JSON bodies
// with size caps and validation, and errors. It holds the single mapping
// between errcode codes and HTTP statuses, used by every Berth HTTP server
// (the daemon's API and the in-sandbox agent) and every client of them.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// statuses maps each code to its HTTP status. Every code in errcode.All
// has an entry (tested).
var statuses = map[errcode.Code]int{
	errcode.Invalid:           http.StatusBadRequest,
	errcode.Unauthenticated:   http.StatusUnauthorized,
	errcode.PermissionDenied:  http.StatusForbidden,
	errcode.NotFound:          http.StatusNotFound,
	errcode.Conflict:          http.StatusConflict,
	errcode.ResourceExhausted: http.StatusTooManyRequests,
	errcode.PayloadTooLarge:   http.StatusRequestEntityTooLarge,
	errcode.Unimplemented:     http.StatusNotImplemented,
	errcode.Unavailable:       http.StatusServiceUnavailable,
	errcode.DeadlineExceeded:  http.StatusGatewayTimeout,
	errcode.Canceled:          499, // client closed request, as nginx names it
	errcode.Internal:          http.StatusInternalServerError,
	errcode.Unprocessable:     http.StatusUnprocessableEntity,
}

// Status returns the HTTP status for code.
func Status(code errcode.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// codeForStatus maps a status back to a code, for error bodies that are not
// ours (a proxy in between, say).
func codeForStatus(status int) errcode.Code {
	for c, s := range statuses {
		if s == status {
			return c
		}
	}
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		return errcode.PayloadTooLarge
	case status >= 500:
		return errcode.Unavailable
	default:
		return errcode.Invalid
	}
}

// Detail converts err into the client-visible error detail. Internal errors
// are reduced to "internal error"; their cause is for the log only.
func Detail(err error, requestID string) apitype.ErrorDetail {
	var e *errcode.Error
	if !errors.As(err, &e) {
		code := errcode.CodeOf(err)
		msg := "internal error"
		switch code {
		case errcode.Canceled:
			msg = "request canceled"
		case errcode.DeadlineExceeded:
			msg = "deadline exceeded"
		}
		return apitype.ErrorDetail{Code: string(code), Message: msg, RequestID: requestID}
	}
	d := apitype.ErrorDetail{
		Code: string(e.Code), Reason: e.Reason, Message: e.Message,
		RequestID: requestID, Problems: e.Problems,
	}
	if e.Code == errcode.Internal && e.Message == "" {
		d.Message = "internal error"
	}
	return d
}

// WriteError writes err as a JSON error response. It logs internal errors once,
// with their cause, through log (which may be nil).
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, requestID string) {
	d := Detail(err, requestID)
	status := Status(errcode.Code(d.Code))
	if status >= 500 && log != nil {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apitype.ErrorBody{Error: d})
}

// ErrorFromResponse decodes an error response into an *errcode.Error. It reads
// at most 64 KiB of the body.
func ErrorFromResponse(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb apitype.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		return &errcode.Error{
			Code: errcode.Code(eb.Error.Code), Reason: eb.Error.Reason,
			Message: eb.Error.Message, Problems: eb.Error.Problems, RequestID: eb.Error.RequestID,
		}
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if len(body) > 0 && len(body) < 512 {
		msg += ": " + string(body)
	}
	return errcode.New(codeForStatus(resp.StatusCode), "%s", msg)
}
