package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/internal/errcode"
)

// handler is a tool's body: the toolset it acts for and its input.
type handler[In, Out any] func(ctx context.Context, ts *Toolset, in In) (*mcp.CallToolResult, Out, error)

// addTool registers a tool whose handler gets its toolset resolved and
// whose errors reach the model as their code, reason and message.
func addTool[In, Out any](s *server, srv *mcp.Server, t *mcp.Tool, h handler[In, Out]) {
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		ts, err := s.toolset(ctx, req)
		if err != nil {
			return nil, zero, toolError(err)
		}
		res, out, err := h(ctx, ts, in)
		if err != nil {
			return nil, zero, toolError(err)
		}
		return res, out, nil
	})
}

// toolError is err as the model reads it: code (reason): message, and
// each field's problem; never a Go error chain with internals.
func toolError(err error) error {
	var e *errcode.Error
	if !errors.As(err, &e) {
		return err
	}
	msg := string(e.Code)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	msg += ": " + e.Message
	for field, problem := range e.Problems {
		msg += fmt.Sprintf("\n%s: %s", field, problem)
	}
	return errors.New(msg)
}

// bound cuts s to at most max bytes on a rune boundary and reports whether
// it cut.
func bound(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// cutNote is the marker after a cut text.
func cutNote(shown, total int64, how string) string {
	return fmt.Sprintf("\n[cut: showed %d of %d bytes; %s]", shown, total, how)
}

// untrusted wraps text that came from a web page or a file: data for the
// model to read, never instructions to follow. A closing marker inside the
// text is defused so the text cannot end the wrapper early.
func untrusted(source, text string) string {
	text = closingMarker.ReplaceAllString(text, "<\\/$1")
	return fmt.Sprintf("<untrusted source=%q>\n%s\n</untrusted>", source, text)
}

var closingMarker = regexp.MustCompile(`(?i)</(untrusted)`)

// textResult is a result of one text block.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
