package tenant

import "time"

// AuditEntry is one mutating call, as the audit log keeps it: never a body
// or a secret.
type AuditEntry struct {
	ID, Tenant                              string
	At                                      time.Time
	KeyID, KeyName, Method, Route, Resource string
	Status                                  int
	Reason, RequestID                       string
}

// AuditPosition is a place in a newest-first listing of the audit log: the
// (At, ID) of the last entry of the previous page. The zero value is
// before the newest entry.
type AuditPosition struct {
	At time.Time
	ID string
}

// IdempotencyRecord is a stored first answer.
type IdempotencyRecord struct {
	Tenant, Key, Route, RequestSHA256 string
	// Status is the answer's HTTP status; 0 while the request that claimed
	// the key is still running.
	Status int
	// Body is the answer's body as the caller stored it (sealed).
	Body                 []byte
	CreatedAt, ExpiresAt time.Time
}
