// Package errcode defines Berth's stable, append-only error codes and the
// error type that carries them across package and process boundaries.
//
// A Code is coarse (it decides the HTTP status); a Reason is the specific,
// machine-readable cause a client can branch on, such as
// "path_escapes_workspace" or "sandbox_limit", declared once in reasons.go
// with the one Code it always comes with (errcode.SandboxLimit.New(...)).
// Both are part of the API and never change meaning once released.
package errcode

import (
	"context"
	"errors"
	"fmt"
)

// Code classifies an error. The list is append-only.
type Code string

const (
	Invalid           Code = "invalid"
	Unauthenticated   Code = "unauthenticated"
	PermissionDenied  Code = "permission_denied"
	NotFound          Code = "not_found"
	Conflict          Code = "conflict"
	ResourceExhausted Code = "resource_exhausted"
	PayloadTooLarge   Code = "payload_too_large"
	Unimplemented     Code = "unimplemented"
	Unavailable       Code = "unavailable"
	DeadlineExceeded  Code = "deadline_exceeded"
	Canceled          Code = "canceled"
	Internal          Code = "internal"
	// Unprocessable is a well-formed request that contradicts an earlier
	// one (an idempotency key reused with another body).
	Unprocessable Code = "unprocessable"
)

// All lists every code, in declaration order. Tests use it to check that
// every code has an HTTP status.
var All = []Code{
	Invalid, Unauthenticated, PermissionDenied, NotFound, Conflict,
	ResourceExhausted, PayloadTooLarge, Unimplemented, Unavailable,
	DeadlineExceeded, Canceled, Internal, Unprocessable,
}

// Error is an error with a code, an optional specific reason, a message safe
// to show to clients, and optional per-field problems.
type Error struct {
	Code     Code
	Reason   string
	Message  string
	Problems map[string]string
	// RequestID is the server's ID of the failed request, when a client
	// decoded the error from a response: quote it when reporting a problem.
	RequestID string
	// Err is the underlying cause. It is logged, never shown to clients.
	Err error
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Reason != "" {
		msg = e.Reason + ": " + msg
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, msg, e.Err)
	}
	return string(e.Code) + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error with code and a formatted client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with code and message whose cause is err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// InvalidFields reports a request that failed validation, with per-field problems.
func InvalidFields(problems map[string]string) *Error {
	return &Error{Code: Invalid, Message: "request is invalid", Problems: problems}
}

// CodeOf returns the code of the first *Error in err's chain, Canceled or
// DeadlineExceeded for context errors, and Internal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Internal
}

// ReasonOf returns the reason of the first *Error in err's chain, or "".
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// MessageOf returns the message of the first *Error in err's chain, the
// text a client is shown, or err.Error() when there is none.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return CodeOf(err) == code }
