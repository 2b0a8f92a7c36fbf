package apitype

import (
	"regexp"
	"strings"
	"time"
)

// Service statuses.
const (
	ServiceStarting = "starting" // process started, readiness not yet seen
	ServiceRunning  = "running"  // process up and ready (or no readiness check)
	ServiceBackoff  = "backoff"  // exited; restarting after the policy's delay
	ServiceExited   = "exited"   // exited and the policy does not restart it
	ServiceFailed   = "failed"   // could not start, or max_restarts reached
	ServiceStopped  = "stopped"  // stopped by a caller
)

// Restart policies.
const (
	RestartNever     = "never"
	RestartOnFailure = "on-failure"
	RestartAlways    = "always"
)

// Service bounds.
const (
	MaxServices        = 32
	MaxServiceRestarts = 1000
	MaxRestartDelayMS  = 10 * 60 * 1000
	DefaultRestartMS   = 1000
)

var serviceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// ValidServiceName reports whether s can name a service: lower-case
// letters, digits and inner dashes, at most 40 characters.
func ValidServiceName(s string) bool { return serviceName.MatchString(s) }

// ServiceSpec is the body of POST /v1/sandboxes/{id}/services: a long-running
// process the sandbox supervises. Its intent is persisted: the service is
// started again when the sandbox wakes and after a daemon restart.
type ServiceSpec struct {
	Name string `json:"name"`
	// Exactly one of Command (run by /bin/sh -c) and Argv must be set.
	Command string            `json:"command,omitempty"`
	Argv    []string          `json:"argv,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Restart RestartPolicy     `json:"restart"`
	// Port is the TCP port the service listens on inside the sandbox, for
	// readiness and previews.
	Port  int        `json:"port,omitempty"`
	Ready *Readiness `json:"ready,omitempty"`
}

// RestartPolicy says when an exited service is started again. Policy
// defaults to on-failure, MaxRestarts 0 means no bound, DelayMS defaults to
// 1000 and doubles with each consecutive failure up to 30 s.
type RestartPolicy struct {
	Policy      string `json:"policy,omitempty"`
	MaxRestarts int    `json:"max_restarts,omitempty"`
	DelayMS     int64  `json:"delay_ms,omitempty"`
}

// Readiness is how a service shows it is ready: a TCP connect to Port, or
// an HTTP GET of HTTPPath on Port answered below 500. TimeoutMS bounds the
// wait after each start (default 60 s); a service not ready by then is
// killed and counted as a failure.
type Readiness struct {
	TCP       bool   `json:"tcp,omitempty"`
	HTTPPath  string `json:"http_path,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// Valid fills in defaults and reports the spec's invalid fields.
func (s *ServiceSpec) Valid() map[string]string {
	p := map[string]string{}
	if !ValidServiceName(s.Name) {
		p["name"] = "must be 1-40 lower-case letters, digits or inner dashes"
	}
	switch {
	case s.Command == "" && len(s.Argv) == 0:
		p["command"] = "one of command and argv is required"
	case s.Command != "" && len(s.Argv) > 0:
		p["command"] = "give command or argv, not both"
	case strings.ContainsRune(s.Command, 0) || strings.ContainsRune(strings.Join(s.Argv, ""), 0):
		p["command"] = "must not contain NUL"
	}
	switch s.Restart.Policy {
	case "":
		s.Restart.Policy = RestartOnFailure
	case RestartNever, RestartOnFailure, RestartAlways:
	default:
		p["restart.policy"] = "must be never, on-failure or always"
	}
	if s.Restart.MaxRestarts < 0 || s.Restart.MaxRestarts > MaxServiceRestarts {
		p["restart.max_restarts"] = "must be between 0 and 1000"
	}
	switch {
	case s.Restart.DelayMS == 0:
		s.Restart.DelayMS = DefaultRestartMS
	case s.Restart.DelayMS < 0 || s.Restart.DelayMS > MaxRestartDelayMS:
		p["restart.delay_ms"] = "must be between 0 and 600000"
	}
	if s.Port < 0 || s.Port > 65535 {
		p["port"] = "must be between 1 and 65535"
	}
	if r := s.Ready; r != nil {
		switch {
		case r.TCP == (r.HTTPPath != ""):
			p["ready"] = "set exactly one of tcp and http_path"
		case s.Port == 0:
			p["ready"] = "needs port"
		case r.HTTPPath != "" && (!strings.HasPrefix(r.HTTPPath, "/") || strings.ContainsAny(r.HTTPPath, " \r\n\x00")):
			p["ready.http_path"] = "must be an absolute path without spaces"
		}
		if r.TimeoutMS < 0 || r.TimeoutMS > MaxRestartDelayMS {
			p["ready.timeout_ms"] = "must be between 0 and 600000"
		}
		if r.TimeoutMS == 0 {
			r.TimeoutMS = 60_000
		}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// ServiceExit is how a service's process last ended.
type ServiceExit struct {
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Service is a service's spec and live state.
type Service struct {
	Name      string       `json:"name"`
	SandboxID string       `json:"sandbox_id,omitempty"`
	Spec      ServiceSpec  `json:"spec"`
	Status    string       `json:"status"`
	Reason    string       `json:"reason,omitempty"`
	PID       int          `json:"pid,omitempty"`
	Ready     bool         `json:"ready"`
	Restarts  int          `json:"restarts"`
	StartedAt *time.Time   `json:"started_at,omitempty"`
	LastExit  *ServiceExit `json:"last_exit,omitempty"`
	// LogBytes is the offset just past the last byte of the log.
	LogBytes int64 `json:"log_bytes"`
}

// ServiceList is the body of GET /v1/sandboxes/{id}/services.
type ServiceList struct {
	Services []Service `json:"services"`
}

// ServiceLogs is a window of a service's log: its standard output and
// standard error, interleaved as written, across restarts. Offsets are
// absolute; bytes older than the retained tail are dropped and the window
// then starts later than asked, with Truncated set.
type ServiceLogs struct {
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Truncated  bool   `json:"truncated"`
	Done       bool   `json:"done"` // the service is stopped or ended for good
}

// Preview is how to reach a port of a sandbox from a browser: the body of
// GET /v1/sandboxes/{id}/previews/{port}.
//
// URL is the host-based address ({port}-{sandbox}.{preview domain}). It
// takes the sandbox's preview token in the X-Berth-Preview-Token header,
// or a cookie that visiting AuthURL (a signed link, valid until ExpiresAt)
// sets. PathURL is the same port under the API, for API key holders.
type Preview struct {
	SandboxID string    `json:"sandbox_id"`
	Port      int       `json:"port"`
	URL       string    `json:"url,omitempty"`
	AuthURL   string    `json:"auth_url,omitempty"`
	Token     string    `json:"token,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
	PathURL   string    `json:"path_url"`
}
