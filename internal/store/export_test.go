package store

import "database/sql"

// SQL exposes the connection pool to tests, which check per-connection
// settings (PRAGMAs) that only the pool's own connections carry.
func (db *DB) SQL() *sql.DB { return db.db }
