package client

import (
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// The API's wire types, under names code outside this module can use.
type (
	Sandbox              = apitype.Sandbox
	CreateSandboxRequest = apitype.CreateSandboxRequest
	Command              = apitype.Command
	CreateCommandRequest = apitype.CreateCommandRequest
	StdinRequest         = apitype.StdinRequest
	StreamEvent          = apitype.StreamEvent
	FileInfo             = apitype.FileInfo
	FileList             = apitype.FileList
	MoveRequest          = apitype.MoveRequest
	Key                  = apitype.Key
	CreateKeyRequest     = apitype.CreateKeyRequest
	System               = apitype.System
	RuntimeInfo          = apitype.RuntimeInfo
	ServiceSpec          = apitype.ServiceSpec
	RestartPolicy        = apitype.RestartPolicy
	Readiness            = apitype.Readiness
	Service              = apitype.Service
	ServiceLogs          = apitype.ServiceLogs
)

// Error is the error API calls return for failures the server reported:
// a coarse Code, a specific Reason, a Message and per-field Problems.
type Error = errcode.Error

// Code classifies an Error.
type Code = errcode.Code

// Error codes, as the API sends them.
const (
	Invalid           = errcode.Invalid
	Unauthenticated   = errcode.Unauthenticated
	PermissionDenied  = errcode.PermissionDenied
	NotFound          = errcode.NotFound
	Conflict          = errcode.Conflict
	ResourceExhausted = errcode.ResourceExhausted
	PayloadTooLarge   = errcode.PayloadTooLarge
	Unimplemented     = errcode.Unimplemented
	Unavailable       = errcode.Unavailable
	DeadlineExceeded  = errcode.DeadlineExceeded
	Canceled          = errcode.Canceled
	Internal          = errcode.Internal
)

// Sandbox states and command statuses.
const (
	StateRunning    = apitype.StateRunning
	StatePaused     = apitype.StatePaused
	StateHibernated = apitype.StateHibernated
	StateFailed     = apitype.StateFailed

	CommandRunning     = apitype.CommandRunning
	CommandExited      = apitype.CommandExited
	CommandFailed      = apitype.CommandFailed
	CommandCanceled    = apitype.CommandCanceled
	CommandTimedOut    = apitype.CommandTimedOut
	CommandInterrupted = apitype.CommandInterrupted
)
