package cli

import "fmt"

// SchemaError says the database is not migrated, or is older than this binary: some migrations
// are pending. Commands return it before they touch a missing table, so an operator reads what
// to do instead of a raw "no such table".
type SchemaError struct {
	// Pending counts the migrations not applied yet.
	Pending int
	// Empty is true when no migration at all is applied (a fresh database).
	Empty bool
}

func (e *SchemaError) Error() string {
	if e.Empty {
		return "the database is not migrated: run `commandbus migrate up` with the same --database and --schema first"
	}
	return fmt.Sprintf("the database schema is older than this binary (%d migrations pending): run `commandbus migrate up` with the same --database and --schema first", e.Pending)
}
