package readmodel

import "time"

// Sort orders a list. Every sort ends with the id, so pages never skip or
// repeat a row.
type Sort string

// Sorts. Newest pages on the id, which never changes: stable. Lease and
// expires order the records that have such a time (pending records have a
// lease, completed records a retention expiry) and then the others, newest
// first. They page on a time that can move while the operator pages (a
// lease renewed or taken over, a record completing): such a record may
// show up again on a later page or be missed; refresh the first page to
// see it.
const (
	SortNewest  Sort = "newest"  // id, newest first
	SortLease   Sort = "lease"   // lease expiry of pending records, the longest stuck first
	SortExpires Sort = "expires" // retention expiry of completed records, the soonest first
)

// Sorts lists the sorts in the order the console cycles through them.
var Sorts = []Sort{SortNewest, SortLease, SortExpires}

// Cursor continues a list after the last row of a page (keyset paging).
type Cursor struct {
	At time.Time
	ID int64
}

// Query asks for one page of a list.
type Query struct {
	Filter Filter
	Sort   Sort
	// Limit defaults to 50 and is capped at 1000.
	Limit int
	// After continues from the previous page's Next.
	After *Cursor
}

// Page is one page of a list.
type Page struct {
	Rows   []Row
	DBTime time.Time
	// Next is nil on the last page.
	Next *Cursor
}
