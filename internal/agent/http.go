package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// MaxWait bounds wait_ms on command reads.
const MaxWait = 60 * time.Second

// MaxOutputWindow bounds max_bytes on command reads.
const MaxOutputWindow = 8 << 20

func (a *Agent) fail(w http.ResponseWriter, r *http.Request, err error) {
	wire.WriteError(w, r, a.log, err, r.Header.Get("X-Request-Id"))
}

func (a *Agent) handlePing(w http.ResponseWriter, r *http.Request) {
	wire.Encode(w, http.StatusOK, map[string]any{"ok": true, "pid": os.Getpid()})
}

// handleShutdown ends every command and then the agent, after answering.
func (a *Agent) handleShutdown(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusAccepted)
	if a.stop != nil {
		a.stop()
	}
}

// handleStart starts a command. With wait_ms it answers once the command
// ends (or the wait passes) with its output, as a read would: run and
// result in one round trip.
func (a *Agent) handleStart(w http.ResponseWriter, r *http.Request) {
	wait, q, err := ParseOutputQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req, err := wire.Decode[StartRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.start(req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if wait <= 0 {
		q = outputQuery{}
	}
	rec, err := c.waitView(r.Context(), wait, q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusCreated, rec)
}

// waitView waits up to wait for c to end, then renders it.
func (c *command) waitView(ctx context.Context, wait time.Duration, q outputQuery) (apitype.Command, error) {
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-c.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return c.view(q)
}

func (a *Agent) handleList(w http.ResponseWriter, r *http.Request) {
	out := apitype.CommandList{Commands: []apitype.Command{}}
	for _, c := range a.list() {
		rec, err := c.view(outputQuery{})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		out.Commands = append(out.Commands, rec)
	}
	wire.Encode(w, http.StatusOK, out)
}

// ParseOutputQuery reads wait_ms, stdout_offset, stderr_offset, max_bytes
// and encoding from a command read's query. The daemon uses it to validate
// before forwarding.
func ParseOutputQuery(r *http.Request) (wait time.Duration, q outputQuery, err error) {
	v := r.URL.Query()
	num := func(name string, dflt, maxV int64) (int64, error) { return wire.QueryInt(v, name, dflt, maxV) }
	waitMS, err := num("wait_ms", 0, MaxWait.Milliseconds())
	if err != nil {
		return 0, q, err
	}
	if q.stdoutOffset, err = num("stdout_offset", 0, 1<<62); err != nil {
		return 0, q, err
	}
	if q.stderrOffset, err = num("stderr_offset", 0, 1<<62); err != nil {
		return 0, q, err
	}
	if q.maxBytes, err = num("max_bytes", DefaultOutputCap, MaxOutputWindow); err != nil {
		return 0, q, err
	}
	switch enc := v.Get("encoding"); enc {
	case "", "utf8", "utf-8":
	case "base64":
		q.base64 = true
	default:
		return 0, q, errcode.QueryInvalid.New("encoding must be utf8 or base64, not %q", enc)
	}
	return time.Duration(waitMS) * time.Millisecond, q, nil
}

func (a *Agent) handleGet(w http.ResponseWriter, r *http.Request) {
	wait, q, err := ParseOutputQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rec, err := c.waitView(r.Context(), wait, q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, rec)
}

func (a *Agent) handleForget(w http.ResponseWriter, r *http.Request) {
	c, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !c.isDone() {
		a.fail(w, r, errcode.CommandRunning.New("command %s is still running", c.id))
		return
	}
	a.mu.Lock()
	if _, ok := a.cmds[c.id]; ok {
		a.forgetLocked(c)
	}
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) handleCancel(w http.ResponseWriter, r *http.Request) {
	c, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.kill(c, apitype.CommandCanceled)
	// Wait briefly so the answer usually carries the final status.
	t := time.NewTimer(a.cfg.KillGrace + time.Second)
	select {
	case <-c.done:
	case <-t.C:
	case <-r.Context().Done():
	}
	t.Stop()
	rec, err := c.view(outputQuery{})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, rec)
}

func (a *Agent) handleStdin(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.StdinRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	data, err := inputData(req.Data, req.DataBase64)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := c.writeStdin(data, req.EOF); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleStream sends a command's output as Server-Sent Events from the
// given offsets until it exits: "stdout" and "stderr" events with data,
// then one "exit" event with the final record.
func (a *Agent) handleStream(w http.ResponseWriter, r *http.Request) {
	_, q, err := ParseOutputQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	offsets := map[string]int64{"stdout": q.stdoutOffset, "stderr": q.stderrOffset}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		// Observe completion before reading, so that after done nothing
		// written earlier can be missed.
		done := c.isDone()
		outSt, errSt := c.stdout.state(), c.stderr.state()
		sent := false
		for _, s := range []struct {
			name string
			o    *output
		}{{"stdout", c.stdout}, {"stderr", c.stderr}} {
			for {
				b, next, err := s.o.read(offsets[s.name], 64<<10)
				if err != nil || len(b) == 0 {
					break
				}
				ev := apitype.StreamEvent{Offset: next - int64(len(b))}
				if q.base64 {
					ev.DataBase64 = base64.StdEncoding.EncodeToString(b)
				} else {
					ev.Data = string(b)
				}
				if writeEvent(w, s.name, ev) != nil {
					return
				}
				offsets[s.name] = next
				sent = true
			}
		}
		if done {
			rec, err := c.view(outputQuery{stdoutOffset: offsets["stdout"], stderrOffset: offsets["stderr"]})
			if err == nil {
				_ = writeEvent(w, "exit", apitype.StreamEvent{Command: &rec})
			}
			_ = rc.Flush()
			return
		}
		if sent {
			if rc.Flush() != nil {
				return
			}
		}
		select {
		case <-outSt.changed:
		case <-errSt.changed:
		case <-c.done:
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, name string, ev apitype.StreamEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}

// inputData is the bytes of an input request: text, then base64 bytes.
func inputData(text, b64 string) ([]byte, error) {
	data := []byte(text)
	if b64 != "" {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, errcode.InvalidFields(map[string]string{"data_base64": "is not valid base64"})
		}
		data = append(data, b...)
	}
	return data, nil
}
