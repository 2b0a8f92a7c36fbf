package httpapi

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/wire"
)

// handleCreateTerminal starts a terminal in a sandbox. Unlike the other
// terminal routes it is not a plain proxy: the sandbox's environment goes
// under the request's, as it does for commands, and only the daemon knows
// it.
func (s *Server) handleCreateTerminal() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.CreateTerminalRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		problems := map[string]string{}
		sandbox.ValidateEnv(req.Env, problems, "env")
		if len(problems) > 0 {
			s.fail(w, r, errcode.InvalidFields(problems))
			return
		}
		id := r.PathValue("id")
		c, err := s.cfg.Sandboxes.Agent(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		sb, err := s.cfg.Sandboxes.Get(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		env := maps.Clone(sb.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, req.Env)
		req.Env = env
		out, err := c.CreateTerminal(r.Context(), req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusCreated, out)
	})
}

// handleAttachTerminal proxies a terminal's WebSocket to the agent. An
// attached terminal is use of its sandbox, though no API call comes while
// a person types: while the connection lasts the sandbox is marked used,
// so that idle policies do not pause or hibernate it under them.
func (s *Server) handleAttachTerminal() http.Handler {
	proxy := s.proxyToAgent("/v1/terminals/{tid}/ws", 0)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, stop := context.WithCancel(r.Context())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		wg.Go(func() { s.keepInUse(ctx, r.PathValue("id")) })
		// For an upgrade, ServeHTTP returns when the connection ends.
		proxy.ServeHTTP(w, r)
	})
}

// keepInUse marks a running sandbox used until ctx ends, often enough for
// its idle policy never to find it idle.
func (s *Server) keepInUse(ctx context.Context, id string) {
	for {
		every := 30 * time.Second
		sb, err := s.cfg.Sandboxes.Get(ctx, id)
		if err == nil {
			for _, ms := range []int64{sb.Idle.PauseAfterMS, sb.Idle.HibernateAfterMS, sb.Idle.DeleteAfterMS} {
				if ms > 0 {
					every = min(every, max(time.Duration(ms)*time.Millisecond/4, 100*time.Millisecond))
				}
			}
			// Only a running sandbox: Agent resumes a paused one, and a
			// pause someone asked for must stand.
			if sb.State == apitype.StateRunning {
				_, _ = s.cfg.Sandboxes.Agent(ctx, id) // marks it used
			}
		}
		t := time.NewTimer(every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}
