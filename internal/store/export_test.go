package store

import "database/sql"

// SQL exposes the connection pool to tests, which check per-connection
// settings (PRAGMAs) that only the pool's own connections carry.
func (db *DB) SQL() *sql.DB { return db.db }

// PostgresSchema is DDL written for both engines as Postgres runs it.
func PostgresSchema(ddl string) string { return (&DB{dialect: Postgres}).schema(ddl) }
