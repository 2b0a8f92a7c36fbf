package errcode

import "fmt"

// Reason is a specific, machine-readable cause a client can branch on,
// such as "sandbox_limit", with the one Code it always comes with. Every
// reason Berth produces is declared below, under its code; docs/api.md
// lists them all (TestReasonsDocumented). Like codes, reasons are part of
// the API: append-only, and never moved to another code.
type Reason struct {
	code Code
	name string
}

// Code is the code an error of reason r carries.
func (r Reason) Code() Code { return r.code }

// String is the reason's name, as clients see it.
func (r Reason) String() string { return r.name }

// New returns an error of reason r with a formatted client-safe message.
func (r Reason) New(format string, args ...any) *Error {
	return &Error{Code: r.code, Reason: r.name, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of reason r whose cause is err.
func (r Reason) Wrap(err error, format string, args ...any) *Error {
	e := r.New(format, args...)
	e.Err = err
	return e
}

// Has reports whether err carries reason r.
func Has(err error, r Reason) bool { return ReasonOf(err) == r.name }

// Named returns the declared reason called name.
func Named(name string) (Reason, bool) {
	for _, r := range Reasons {
		if r.name == name {
			return r, true
		}
	}
	return Reason{}, false
}

// Reasons lists every declared reason, in declaration order.
var Reasons []Reason

func reason(code Code, name string) Reason {
	r := Reason{code: code, name: name}
	Reasons = append(Reasons, r)
	return r
}

// Reasons of Invalid (400).
var (
	ServiceTokenInvalid    = reason(Invalid, "service_token_invalid")
	WorkerConfigInvalid    = reason(Invalid, "worker_config_invalid")
	BlobDigestMismatch     = reason(Invalid, "blob_digest_mismatch")
	BodyDuplicateField     = reason(Invalid, "body_duplicate_field")
	BodyFieldCase          = reason(Invalid, "body_field_case")
	BodyInvalid            = reason(Invalid, "body_invalid")
	BodyInvalidUTF8        = reason(Invalid, "body_invalid_utf8")
	CredentialsInQuery     = reason(Invalid, "credentials_in_query")
	CursorInvalid          = reason(Invalid, "cursor_invalid")
	DatabaseCorrupt        = reason(Invalid, "database_corrupt")
	DatabaseNewerThanBerth = reason(Invalid, "database_newer_than_berth")
	DeckInvalid            = reason(Invalid, "deck_invalid")
	ImageAmbiguous         = reason(Invalid, "image_ambiguous")
	ImageInvalid           = reason(Invalid, "image_invalid")
	ImageMountPointInvalid = reason(Invalid, "image_mount_point_invalid")
	ImagePlatformMismatch  = reason(Invalid, "image_platform_mismatch")
	InvalidSHA256          = reason(Invalid, "invalid_sha256")
	IsDirectory            = reason(Invalid, "is_directory")
	MethodNotAllowed       = reason(Invalid, "method_not_allowed")
	NotABerthDatabase      = reason(Invalid, "not_a_berth_database")
	NotDirectory           = reason(Invalid, "not_directory")
	NotRegularFile         = reason(Invalid, "not_regular_file")
	OpUnknown              = reason(Invalid, "op_unknown")
	PDFInvalid             = reason(Invalid, "pdf_invalid")
	PNGInvalid             = reason(Invalid, "png_invalid")
	PPTXInvalid            = reason(Invalid, "pptx_invalid")
	MCPRequestInvalid      = reason(Invalid, "mcp_request_invalid")
	PathEscapesWorkspace   = reason(Invalid, "path_escapes_workspace")
	SecretHostRefused      = reason(Invalid, "secret_host_refused")
	StationActionUnknown   = reason(Invalid, "station_action_unknown")
	StationMethodUnknown   = reason(Invalid, "station_method_unknown")
	PathInvalid            = reason(Invalid, "path_invalid")
	PathIsSymlink          = reason(Invalid, "path_is_symlink")
	PathTooLong            = reason(Invalid, "path_too_long")
	PortInvalid            = reason(Invalid, "port_invalid")
	QuarantineEntryUnnamed = reason(Invalid, "quarantine_entry_unnamed")
	QueryInvalid           = reason(Invalid, "query_invalid")
	RestoreOntoItself      = reason(Invalid, "restore_onto_itself")
	RuntimeUnknown         = reason(Invalid, "runtime_unknown")
	ScriptError            = reason(Invalid, "script_error")
	TargetInvalid          = reason(Invalid, "target_invalid")
	URLBlocked             = reason(Invalid, "url_blocked")
	UnsafePath             = reason(Invalid, "unsafe_path")
	WarmPoolDuplicate      = reason(Invalid, "warm_pool_duplicate")
	WebsocketRequired      = reason(Invalid, "websocket_required")
	WorkspaceRoot          = reason(Invalid, "workspace_root")
)

// Reasons of Unauthenticated (401).
var (
	LiveLinkInvalid      = reason(Unauthenticated, "live_link_invalid")
	PreviewLinkInvalid   = reason(Unauthenticated, "preview_link_invalid")
	PreviewTokenRequired = reason(Unauthenticated, "preview_token_required")
	DashboardSignedOut   = reason(Unauthenticated, "dashboard_signed_out")
	// ServiceCredentialInvalid: a request to a worker without HQ's valid
	// assertion (internal/cluster).
	ServiceCredentialInvalid = reason(Unauthenticated, "service_credential_invalid")
)

// Reasons of PermissionDenied (403).
var (
	FilePermission    = reason(PermissionDenied, "file_permission")
	ScopeInsufficient = reason(PermissionDenied, "scope_insufficient")
	MCPHostForbidden  = reason(PermissionDenied, "mcp_host_forbidden")
	TenantMode        = reason(PermissionDenied, "tenant_mode")
	CSRFInvalid       = reason(PermissionDenied, "csrf_invalid")
)

// Reasons of NotFound (404).
var (
	WorkerNotFound          = reason(NotFound, "worker_not_found")
	ActionMissing           = reason(NotFound, "ACTION_MISSING")
	BackupNotFound          = reason(NotFound, "backup_not_found")
	CommandNotFound         = reason(NotFound, "command_not_found")
	DataDirNotFound         = reason(NotFound, "data_dir_not_found")
	DatabaseNotFound        = reason(NotFound, "database_not_found")
	ArtifactNotFound        = reason(NotFound, "artifact_not_found")
	CheckpointNotFound      = reason(NotFound, "checkpoint_not_found")
	FileNotFound            = reason(NotFound, "file_not_found")
	FrameNotFound           = reason(NotFound, "frame_not_found")
	ImageNotFound           = reason(NotFound, "image_not_found")
	JobNotFound             = reason(NotFound, "job_not_found")
	KeyNotFound             = reason(NotFound, "key_not_found")
	LogNotFound             = reason(NotFound, "log_not_found")
	OptionNotFound          = reason(NotFound, "option_not_found")
	PoolNotFound            = reason(NotFound, "pool_not_found")
	QuarantineEntryNotFound = reason(NotFound, "quarantine_entry_not_found")
	RecordingFrameNotFound  = reason(NotFound, "recording_frame_not_found")
	RecordingNotFound       = reason(NotFound, "recording_not_found")
	RouteNotFound           = reason(NotFound, "route_not_found")
	SandboxNotFound         = reason(NotFound, "sandbox_not_found")
	ServiceNotFound         = reason(NotFound, "service_not_found")
	SessionNotFound         = reason(NotFound, "session_not_found")
	StationNotFound         = reason(NotFound, "station_not_found")
	TargetNotFound          = reason(NotFound, "target_not_found")
	TemplateNotFound        = reason(NotFound, "template_not_found")
	TenantNotFound          = reason(NotFound, "tenant_not_found")
	TerminalNotFound        = reason(NotFound, "terminal_not_found")
)

// Reasons of Conflict (409).
var (
	// ResourceLost: the worker that owned it is gone past its lease.
	ResourceLost           = reason(Conflict, "resource_lost")
	BackupFileExists       = reason(Conflict, "backup_file_exists")
	BusinessIDConflict     = reason(Conflict, "business_id_conflict")
	BusinessIDTaken        = reason(Conflict, "business_id_taken")
	Busy                   = reason(Conflict, "busy")
	CDPNeedsProcessMode    = reason(Conflict, "cdp_needs_process_mode")
	CommandFinished        = reason(Conflict, "command_finished")
	CommandRunning         = reason(Conflict, "command_running")
	ControlHeld            = reason(Conflict, "control_held")
	ControlNotHeld         = reason(Conflict, "control_not_held")
	DataDirLocked          = reason(Conflict, "data_dir_locked")
	DatabaseEmptyWithData  = reason(Conflict, "database_empty_with_data")
	DirectoryNotEmpty      = reason(Conflict, "directory_not_empty")
	DownloadCanceled       = reason(Conflict, "download_canceled")
	ElementEmpty           = reason(Conflict, "element_empty")
	ElementError           = reason(Conflict, "element_error")
	FileExists             = reason(Conflict, "file_exists")
	FirstPage              = reason(Conflict, "first_page")
	IdempotencyInProgress  = reason(Conflict, "idempotency_in_progress")
	JobFinished            = reason(Conflict, "job_finished")
	JobState               = reason(Conflict, "job_state")
	NameTaken              = reason(Conflict, "name_taken")
	NoHistory              = reason(Conflict, "no_history")
	NoPage                 = reason(Conflict, "no_page")
	NotEditable            = reason(Conflict, "not_editable")
	NotFileInput           = reason(Conflict, "not_file_input")
	PathChanged            = reason(Conflict, "path_changed")
	ProfileInUse           = reason(Conflict, "profile_in_use")
	RefStale               = reason(Conflict, "ref_stale")
	SandboxDirectoryExists = reason(Conflict, "sandbox_directory_exists")
	SandboxNotInDatabase   = reason(Conflict, "sandbox_not_in_database")
	SandboxNotPaused       = reason(Conflict, "sandbox_not_paused")
	SandboxNotRunning      = reason(Conflict, "sandbox_not_running")
	NetworkNone            = reason(Conflict, "network_none")
	SessionClosed          = reason(Conflict, "session_closed")
	SessionCrashed         = reason(Conflict, "session_crashed")
	StateUnchanged         = reason(Conflict, "state_unchanged")
	StdinClosed            = reason(Conflict, "stdin_closed")
	TargetAmbiguous        = reason(Conflict, "target_ambiguous")
	TemplateBuilding       = reason(Conflict, "template_building")
	TemplateBuiltin        = reason(Conflict, "template_builtin")
	TemplateExists         = reason(Conflict, "template_exists")
	TemplateInUse          = reason(Conflict, "template_in_use")
	TemplateNotReady       = reason(Conflict, "template_not_ready")
	TenantBound            = reason(Conflict, "tenant_bound")
	TenantDefault          = reason(Conflict, "tenant_default")
	TenantNotEmpty         = reason(Conflict, "tenant_not_empty")
	TerminalExited         = reason(Conflict, "terminal_exited")
	TraceActive            = reason(Conflict, "trace_active")
	TraceDiscarded         = reason(Conflict, "trace_discarded")
	TraceNeedsProcessMode  = reason(Conflict, "trace_needs_process_mode")
	TraceNotActive         = reason(Conflict, "trace_not_active")
)

// Reasons of ResourceExhausted (429).
var (
	ArtifactLimit     = reason(ResourceExhausted, "artifact_limit")
	CheckpointLimit   = reason(ResourceExhausted, "checkpoint_limit")
	CommandLimit      = reason(ResourceExhausted, "command_limit")
	AuthThrottled     = reason(ResourceExhausted, "auth_throttled")
	DiskFull          = reason(ResourceExhausted, "disk_full")
	PageLimit         = reason(ResourceExhausted, "page_limit")
	QuotaExceeded     = reason(ResourceExhausted, "quota_exceeded")
	RecordingLimit    = reason(ResourceExhausted, "recording_limit")
	RateLimited       = reason(ResourceExhausted, "rate_limited")
	SandboxLimit      = reason(ResourceExhausted, "sandbox_limit")
	SessionLimit      = reason(ResourceExhausted, "session_limit")
	TerminalLimit     = reason(ResourceExhausted, "terminal_limit")
	TooManyServices   = reason(ResourceExhausted, "too_many_services")
	UIDRangeExhausted = reason(ResourceExhausted, "uid_range_exhausted")
	ViewerLimit       = reason(ResourceExhausted, "viewer_limit")
)

// Reasons of Unprocessable (422).
var (
	IdempotencyKeyReused = reason(Unprocessable, "idempotency_key_reused")
)

// Reasons of PayloadTooLarge (413).
var (
	BodyTooLarge        = reason(PayloadTooLarge, "body_too_large")
	DeckTooLarge        = reason(PayloadTooLarge, "deck_too_large")
	DownloadTooLarge    = reason(PayloadTooLarge, "download_too_large")
	FileTooLarge        = reason(PayloadTooLarge, "file_too_large")
	ImageTooLarge       = reason(PayloadTooLarge, "image_too_large")
	ImageTooManyEntries = reason(PayloadTooLarge, "image_too_many_entries")
	InputsTooLarge      = reason(PayloadTooLarge, "inputs_too_large")
	PNGTooLarge         = reason(PayloadTooLarge, "png_too_large")
	ResultTooLarge      = reason(PayloadTooLarge, "result_too_large")
	UploadTooLarge      = reason(PayloadTooLarge, "upload_too_large")
)

// Reasons of Unimplemented (501).
var (
	// ClusterUnsupported: what a cluster's HQ does not serve yet.
	ClusterUnsupported         = reason(Unimplemented, "cluster_unsupported")
	CheckpointUnsupported      = reason(Unimplemented, "checkpoint_unsupported")
	DigestUnsupported          = reason(Unimplemented, "digest_unsupported")
	FFmpegUnavailable          = reason(Unimplemented, "ffmpeg_unavailable")
	FrameCrossOrigin           = reason(Unimplemented, "frame_cross_origin")
	LayerMediaTypeUnsupported  = reason(Unimplemented, "layer_media_type_unsupported")
	NetworkUnavailable         = reason(Unimplemented, "network_unavailable")
	PauseUnsupported           = reason(Unimplemented, "pause_unsupported")
	ProviderNotConfigured      = reason(Unimplemented, "provider_not_configured")
	RuntimeUnavailable         = reason(Unimplemented, "runtime_unavailable")
	RuntimeUnsupported         = reason(Unimplemented, "runtime_unsupported")
	StationMethodUnimplemented = reason(Unimplemented, "station_method_unimplemented")
	UIDRegistryUnsupported     = reason(Unimplemented, "uid_registry_unsupported")
	// SQLiteOnly: a tool of the embedded SQLite file (inspect, backup,
	// restore) given a Postgres database.
	SQLiteOnly = reason(Unimplemented, "sqlite_only")
)

// Reasons of Unavailable (503).
var (
	ActionInvalid       = reason(Unavailable, "ACTION_INVALID")
	AgentSocketInvalid  = reason(Unavailable, "agent_socket_invalid")
	AgentStartTimeout   = reason(Unavailable, "agent_start_timeout")
	BrowserUnavailable  = reason(Unavailable, "browser_unavailable")
	JobBusy             = reason(Unavailable, "job_busy")
	JournalUnavailable  = reason(Unavailable, "journal_unavailable")
	NavigationFailed    = reason(Unavailable, "navigation_failed")
	PortUnreachable     = reason(Unavailable, "port_unreachable")
	ProfileMissing      = reason(Unavailable, "PROFILE_MISSING")
	ProfileUnhealthy    = reason(Unavailable, "PROFILE_UNHEALTHY")
	ProviderFailed      = reason(Unavailable, "provider_failed")
	ProviderUnavailable = reason(Unavailable, "PROVIDER_UNAVAILABLE")
	RuntimeGone         = reason(Unavailable, "runtime_gone")
	RuntimeUnbound      = reason(Unavailable, "RUNTIME_UNBOUND")
	VersionMismatch     = reason(Unavailable, "VERSION_MISMATCH")
	WorkerUnavailable   = reason(Unavailable, "WORKER_UNAVAILABLE")
	// The cluster (internal/cluster): the owner of a resource is offline;
	// a forwarded mutation whose outcome nobody knows; a draining worker;
	// no worker with the capability and room; the shared database down.
	OwnerUnavailable    = reason(Unavailable, "owner_unavailable")
	OwnerOutcomeUnknown = reason(Unavailable, "owner_outcome_unknown")
	WorkerDraining      = reason(Unavailable, "worker_draining")
	NoWorkerAvailable   = reason(Unavailable, "no_worker_available")
	DatabaseUnavailable = reason(Unavailable, "database_unavailable")
)

// Reasons of DeadlineExceeded (504).
var (
	ActionTimeout        = reason(DeadlineExceeded, "action_timeout")
	DownloadTimeout      = reason(DeadlineExceeded, "download_timeout")
	StdinBlocked         = reason(DeadlineExceeded, "stdin_blocked")
	TargetNotActionable  = reason(DeadlineExceeded, "target_not_actionable")
	TerminalInputBlocked = reason(DeadlineExceeded, "terminal_input_blocked")
	WaitTimeout          = reason(DeadlineExceeded, "wait_timeout")
)

// Reasons of Canceled (499).
var (
	JobCanceled = reason(Canceled, "job_canceled")
)
