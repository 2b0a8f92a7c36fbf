package mcpserver

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Exec bounds: a command's deadline by default and at most.
const (
	defaultExecTimeout = 60 * time.Second
	maxExecTimeout     = 10 * time.Minute
	maxFileWrite       = 4 << 20
)

type sandboxOpenIn struct {
	Name     string `json:"name" jsonschema:"A name you choose for the workspace (letters, digits, dot, dash, underscore). The same name returns the same sandbox, with its files."`
	Template string `json:"template,omitempty" jsonschema:"A template to start from (berth template ls); the daemon's default when empty."`
	Runtime  string `json:"runtime,omitempty" jsonschema:"process, container or gvisor; the daemon's default when empty."`
}

type sandboxOut struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
	State   string `json:"state"`
	Runtime string `json:"runtime"`
	Created bool   `json:"created" jsonschema:"true when this call made the sandbox, false when it already existed"`
}

type sandboxRef struct {
	Sandbox string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
}

type execIn struct {
	Sandbox        string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Command        string `json:"command" jsonschema:"A shell command line, run by /bin/sh -c in the workspace."`
	Cwd            string `json:"cwd,omitempty" jsonschema:"Working directory, relative to the workspace."`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"Kill the command after this many seconds (default 60, at most 600)."`
	Stdin          string `json:"stdin,omitempty" jsonschema:"Text written to the command's standard input."`
}

type readFileIn struct {
	Sandbox string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Path    string `json:"path" jsonschema:"A path relative to the workspace."`
	Offset  int64  `json:"offset,omitempty" jsonschema:"Start reading at this byte offset (to read past a cut)."`
}

type writeFileIn struct {
	Sandbox string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Path    string `json:"path" jsonschema:"A path relative to the workspace; parent directories are made."`
	Content string `json:"content" jsonschema:"The file's whole new content (UTF-8 text, at most 4 MiB)."`
}

type listFilesIn struct {
	Sandbox string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Path    string `json:"path,omitempty" jsonschema:"A directory relative to the workspace; the workspace itself when empty."`
}

type deleteFileIn struct {
	Sandbox   string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Path      string `json:"path" jsonschema:"A path relative to the workspace."`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"Delete a directory and everything in it."`
}

type serviceIn struct {
	Sandbox string `json:"sandbox" jsonschema:"The sandbox ID from sandbox_open."`
	Name    string `json:"name" jsonschema:"The service's name (it replaces a service of that name)."`
	Command string `json:"command" jsonschema:"The shell command that runs the server in the foreground, e.g. python3 -m http.server 8000."`
	Port    int    `json:"port" jsonschema:"The TCP port it listens on inside the sandbox."`
	Cwd     string `json:"cwd,omitempty" jsonschema:"Working directory, relative to the workspace."`
}

type serviceOut struct {
	Name       string `json:"name"`
	Status     string `json:"status"`
	Ready      bool   `json:"ready"`
	PreviewURL string `json:"preview_url,omitempty" jsonschema:"A link that opens the service in a browser, without a key, until expires_at (absent when the daemon has preview hosts off)."`
	ExpiresAt  string `json:"expires_at,omitempty"`
	APIURL     string `json:"api_url" jsonschema:"The port through the API, for holders of the key."`
}

func (s *server) addSandboxTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{Name: "sandbox_open",
		Description: "Get or create an isolated Linux workspace by name: files persist between calls, commands run inside it. Call it first; the same name returns the same sandbox.",
	}, s.sandboxOpen)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_list", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "List the sandboxes this toolset made, with their state.",
	}, s.sandboxList)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_exec",
		Description: "Run a shell command in a sandbox and wait for it to end. Returns the exit code and the output (each stream cut at 16 KiB, marked when cut: redirect long output to a file and read it with sandbox_read_file).",
	}, s.sandboxExec)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_read_file", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "Read a file from a sandbox: text (cut at 16 KiB, marked; continue with offset) or an image.",
	}, s.sandboxReadFile)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_write_file",
		Description: "Write a text file in a sandbox (replacing it), making parent directories.",
	}, s.sandboxWriteFile)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_list_files", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "List a directory of a sandbox: name, type, size.",
	}, s.sandboxListFiles)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_delete_file", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
		Description: "Delete a file (or, with recursive, a directory) in a sandbox.",
	}, s.sandboxDeleteFile)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_start_service",
		Description: "Start a long-running server in a sandbox (restarted if it fails) and return a preview link to its port that a person can open.",
	}, s.sandboxStartService)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_hibernate",
		Description: "Hibernate a sandbox: its processes stop and its files stay; the next command wakes it.",
	}, s.sandboxHibernate)
	addTool(s, srv, &mcp.Tool{Name: "sandbox_delete", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
		Description: "Delete a sandbox and all its files, for good.",
	}, s.sandboxDelete)
}

func ptr[T any](v T) *T { return &v }

// sandbox checks that id is one of the toolset's sandboxes: by its label,
// which survives restarts, once; then from memory (a label never changes,
// and the routes answer 404 for a sandbox deleted since).
func (ts *Toolset) sandbox(ctx context.Context, id string) error {
	if id == "" {
		return errcode.InvalidFields(map[string]string{"sandbox": "required: the ID from sandbox_open"})
	}
	if ts.has(ts.sandboxes, id) {
		return nil
	}
	sb, err := ts.client().GetSandbox(ctx, id)
	if client.IsCode(err, errcode.NotFound) || (err == nil && sb.Labels[ToolsetLabel] != ts.id) {
		return outsideToolset("sandbox", id)
	}
	if err == nil {
		ts.add(ts.sandboxes, id)
	}
	return err
}

func toSandboxOut(sb apitype.Sandbox, created bool) sandboxOut {
	return sandboxOut{ID: sb.ID, Name: sb.Name, State: sb.State, Runtime: sb.Runtime, Created: created}
}

func (s *server) sandboxOpen(ctx context.Context, ts *Toolset, in sandboxOpenIn) (*mcp.CallToolResult, sandboxOut, error) {
	if in.Name == "" {
		return nil, sandboxOut{}, errcode.InvalidFields(map[string]string{"name": "required: a name you choose"})
	}
	c := ts.client()
	// A name another client made is not this toolset's.
	if sbs, err := c.ListSandboxes(ctx); err == nil {
		for _, sb := range sbs {
			if sb.Name == in.Name {
				if sb.Labels[ToolsetLabel] != ts.id {
					return nil, sandboxOut{}, errcode.New(errcode.Conflict, "a sandbox named %q exists outside this toolset; choose another name", in.Name)
				}
				ts.add(ts.sandboxes, sb.ID)
				ts.settle("sandbox " + in.Name)
				return nil, toSandboxOut(sb, false), nil
			}
		}
	}
	kind := "sandbox " + in.Name
	key := ts.pendingKey(kind)
	sb, err := c.CreateSandbox(client.WithIdempotencyKey(ctx, key), apitype.CreateSandboxRequest{
		Name: in.Name, Template: in.Template, Runtime: in.Runtime, Labels: map[string]string{ToolsetLabel: ts.id},
	})
	if err != nil {
		if !isAPIError(err) {
			return nil, sandboxOut{}, unknownOutcome("sandbox_open", err)
		}
		ts.settle(kind)
		return nil, sandboxOut{}, err
	}
	ts.settle(kind)
	if sb.Labels[ToolsetLabel] != ts.id {
		return nil, sandboxOut{}, errcode.New(errcode.Conflict, "a sandbox named %q exists outside this toolset; choose another name", in.Name)
	}
	ts.add(ts.sandboxes, sb.ID)
	return nil, toSandboxOut(sb, true), nil
}

// pendingKey is the idempotency key for a create of kind: the key of an
// earlier create whose outcome is unknown (so repeating it finds out), or
// a new one, kept until settle.
func (ts *Toolset) pendingKey(kind string) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if k, ok := ts.pending[kind]; ok {
		return k
	}
	k := newIdempotencyKey()
	ts.pending[kind] = k
	return k
}

// settle forgets kind's pending key: its create's outcome is known.
func (ts *Toolset) settle(kind string) {
	ts.mu.Lock()
	delete(ts.pending, kind)
	ts.mu.Unlock()
}

type sandboxListOut struct {
	Sandboxes []sandboxOut `json:"sandboxes"`
}

func (s *server) sandboxList(ctx context.Context, ts *Toolset, _ struct{}) (*mcp.CallToolResult, sandboxListOut, error) {
	sbs, err := ts.client().ListSandboxes(ctx)
	out := sandboxListOut{Sandboxes: []sandboxOut{}}
	for _, sb := range sbs {
		if sb.Labels[ToolsetLabel] == ts.id {
			out.Sandboxes = append(out.Sandboxes, toSandboxOut(sb, false))
		}
	}
	return nil, out, err
}

type execOut struct {
	CommandID       string `json:"command_id"`
	Status          string `json:"status"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	Signal          string `json:"signal,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

func (s *server) sandboxExec(ctx context.Context, ts *Toolset, in execIn) (*mcp.CallToolResult, execOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, execOut{}, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, execOut{}, errcode.InvalidFields(map[string]string{"command": "required: a shell command line"})
	}
	timeout := defaultExecTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	if timeout > maxExecTimeout {
		return nil, execOut{}, errcode.InvalidFields(map[string]string{"timeout_seconds": fmt.Sprintf("at most %d", int(maxExecTimeout/time.Second))})
	}
	c := ts.client()
	q := client.CommandQuery{WaitMS: 60_000, MaxBytes: int64(s.maxText)}
	cmd, err := c.ExecWait(ctx, in.Sandbox, apitype.CreateCommandRequest{
		Command: in.Command, Cwd: in.Cwd, TimeoutMS: timeout.Milliseconds(), Stdin: in.Stdin,
	}, q)
	if err != nil {
		if !isAPIError(err) {
			return nil, execOut{}, fmt.Errorf("the command's outcome is unknown (%v): list the sandbox's state with sandbox_list, and check its effects before running it again", err)
		}
		return nil, execOut{}, err
	}
	// A command longer than one wait: wait again, never run it again.
	for !cmd.Done() {
		if cmd, err = c.Command(ctx, in.Sandbox, cmd.ID, q); err != nil {
			return nil, execOut{}, err
		}
	}
	out := execOut{CommandID: cmd.ID, Status: cmd.Status, ExitCode: cmd.ExitCode, Signal: cmd.Signal,
		Stdout: cmd.Stdout, Stderr: cmd.Stderr, StdoutBytes: cmd.StdoutBytes, StderrBytes: cmd.StderrBytes,
		StdoutTruncated: cmd.StdoutBytes > int64(len(cmd.Stdout)), StderrTruncated: cmd.StderrBytes > int64(len(cmd.Stderr))}
	return textResult(execText(out, cmd.Reason)), out, nil
}

// execText is a command's result as the model reads it.
func execText(o execOut, reason string) string {
	var b strings.Builder
	switch {
	case o.ExitCode != nil:
		fmt.Fprintf(&b, "exit code %d", *o.ExitCode)
	case o.Signal != "":
		fmt.Fprintf(&b, "killed by %s", o.Signal)
	default:
		b.WriteString(o.Status)
	}
	if reason != "" {
		fmt.Fprintf(&b, " (%s)", reason)
	}
	for _, st := range []struct {
		name  string
		text  string
		total int64
		cut   bool
	}{{"stdout", o.Stdout, o.StdoutBytes, o.StdoutTruncated}, {"stderr", o.Stderr, o.StderrBytes, o.StderrTruncated}} {
		if st.total == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n--- %s ---\n%s", st.name, st.text)
		if st.cut {
			b.WriteString(cutNote(int64(len(st.text)), st.total, "redirect the output to a file and read it with sandbox_read_file and offset"))
		}
	}
	return b.String()
}

func (s *server) sandboxReadFile(ctx context.Context, ts *Toolset, in readFileIn) (*mcp.CallToolResult, any, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, nil, err
	}
	if in.Offset < 0 {
		return nil, nil, errcode.InvalidFields(map[string]string{"offset": "must not be negative"})
	}
	rc, err := ts.client().ReadFile(ctx, in.Sandbox, in.Path)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	if mime := imageMIME(in.Path); mime != "" && in.Offset == 0 {
		data, err := io.ReadAll(io.LimitReader(rc, maxImage+1))
		if err != nil {
			return nil, nil, err
		}
		if len(data) > maxImage {
			return nil, nil, errcode.New(errcode.PayloadTooLarge, "the image is larger than %d bytes; convert or scale it first", maxImage)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: data, MIMEType: mime}}}, nil, nil
	}
	if _, err := io.CopyN(io.Discard, rc, in.Offset); err != nil && err != io.EOF {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(rc, int64(s.maxText)+1))
	if err != nil {
		return nil, nil, err
	}
	rest, _ := io.Copy(io.Discard, io.LimitReader(rc, 1<<30))
	text, cut := bound(string(data), s.maxText)
	if !utf8.ValidString(text) {
		return nil, nil, errcode.New(errcode.Invalid, "%s is not UTF-8 text (%d bytes from offset %d); inspect it with sandbox_exec (file, xxd, head)", in.Path, int64(len(data))+rest, in.Offset)
	}
	body := untrusted(path.Clean(in.Path), text)
	if cut {
		total := in.Offset + int64(len(data)) + rest
		body += cutNote(int64(len(text)), total-in.Offset, fmt.Sprintf("read on with offset %d", in.Offset+int64(len(text))))
	}
	return textResult(body), nil, nil
}

// maxImage bounds an image a tool returns.
const maxImage = 8 << 20

func imageMIME(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}

type fileOut struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

func (s *server) sandboxWriteFile(ctx context.Context, ts *Toolset, in writeFileIn) (*mcp.CallToolResult, fileOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, fileOut{}, err
	}
	if len(in.Content) > maxFileWrite {
		return nil, fileOut{}, errcode.New(errcode.PayloadTooLarge, "content is %d bytes; at most %d", len(in.Content), maxFileWrite)
	}
	fi, err := ts.client().WriteFile(ctx, in.Sandbox, in.Path, strings.NewReader(in.Content), 0)
	return nil, fileOut{Path: fi.Path, Size: fi.Size}, err
}

type listFilesOut struct {
	Path    string      `json:"path"`
	Entries []fileEntry `json:"entries"`
	More    bool        `json:"more" jsonschema:"true when the directory has more entries than shown"`
}

type fileEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// maxListEntries bounds a listing a tool returns.
const maxListEntries = 500

func (s *server) sandboxListFiles(ctx context.Context, ts *Toolset, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, listFilesOut{}, err
	}
	l, err := ts.client().ListFiles(ctx, in.Sandbox, in.Path, "", maxListEntries)
	if err != nil {
		return nil, listFilesOut{}, err
	}
	out := listFilesOut{Path: l.Path, Entries: []fileEntry{}, More: l.NextCursor != ""}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, fileEntry{Name: e.Name, Type: e.Type, Size: e.Size})
	}
	return nil, out, nil
}

type okOut struct {
	OK bool `json:"ok"`
}

func (s *server) sandboxDeleteFile(ctx context.Context, ts *Toolset, in deleteFileIn) (*mcp.CallToolResult, okOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, okOut{}, err
	}
	err := ts.client().Remove(ctx, in.Sandbox, in.Path, in.Recursive)
	return nil, okOut{OK: err == nil}, err
}

func (s *server) sandboxStartService(ctx context.Context, ts *Toolset, in serviceIn) (*mcp.CallToolResult, serviceOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, serviceOut{}, err
	}
	if in.Port <= 0 || in.Port > 65535 {
		return nil, serviceOut{}, errcode.InvalidFields(map[string]string{"port": "required: the TCP port the server listens on (1-65535)"})
	}
	c := ts.client()
	svc, err := c.PutService(ctx, in.Sandbox, apitype.ServiceSpec{Name: in.Name, Command: in.Command, Cwd: in.Cwd, Port: in.Port})
	if err != nil {
		return nil, serviceOut{}, err
	}
	pv, err := c.Preview(ctx, in.Sandbox, in.Port, 0)
	if err != nil {
		return nil, serviceOut{}, err
	}
	out := serviceOut{Name: svc.Name, Status: svc.Status, Ready: svc.Ready, PreviewURL: pv.AuthURL, APIURL: pv.PathURL}
	if pv.AuthURL != "" {
		out.ExpiresAt = pv.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return nil, out, nil
}

func (s *server) sandboxHibernate(ctx context.Context, ts *Toolset, in sandboxRef) (*mcp.CallToolResult, sandboxOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, sandboxOut{}, err
	}
	sb, err := ts.client().HibernateSandbox(ctx, in.Sandbox)
	return nil, toSandboxOut(sb, false), err
}

func (s *server) sandboxDelete(ctx context.Context, ts *Toolset, in sandboxRef) (*mcp.CallToolResult, okOut, error) {
	if err := ts.sandbox(ctx, in.Sandbox); err != nil {
		return nil, okOut{}, err
	}
	err := ts.client().DeleteSandbox(ctx, in.Sandbox)
	if err == nil {
		ts.remove(ts.sandboxes, in.Sandbox)
	}
	return nil, okOut{OK: err == nil}, err
}
