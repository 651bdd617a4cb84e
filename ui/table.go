package ui

import (
	"strconv"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// col names the list's columns.
type col int

const (
	colID col = iota
	colTenant
	colTool
	colKey
	colState
	colDeferred
	colOwner
	colLeaseAge
	colExpires
	colTry
	colRetention
	colCount
)

// column describes one column of the operations list.
type column struct {
	title string
	// min is the narrowest the column may get (never below its content's
	// need when that is smaller); max caps it.
	min, max int
	right    bool
	// drop orders the columns given up on narrow terminals: 1 goes first,
	// 0 never goes.
	drop int
	// filled: the column shows only when a row has something in it.
	filled bool
}

// columns is the operations list, in display order. The key column takes
// the room that is left, and is truncated in the middle.
//
// Room short, the columns go by what an operator needs least: the
// attempt number (1 nearly always), retention, lease age, the owner, a
// deferral's details (the state still says deferred), the lease expiry
// (how long a record has been stuck), then the tool, for a readable key;
// the tenant only when even the minimums do not fit. At 80 cells a row
// keeps its id, tenant, tool, key, state and lease expiry; at 60 a stuck
// list its id, tenant, tool, a readable key and its state.
var columns = [colCount]column{
	colID:        {title: "ID", min: 2, max: 12, right: true},
	colTenant:    {title: "TENANT", min: 6, max: 14, drop: 8},
	colTool:      {title: "TOOL", min: 10, max: 18, drop: 7},
	colKey:       {title: "KEY", min: 16, max: 80},
	colState:     {title: "STATE", min: 12, max: 12},
	colDeferred:  {title: "DEFERRED", min: 12, max: 26, drop: 5, filled: true},
	colOwner:     {title: "OWNER", min: 8, max: 14, drop: 4},
	colLeaseAge:  {title: "LEASE AGE", min: 9, max: 9, drop: 3},
	colExpires:   {title: "EXPIRES", min: 9, max: 9, drop: 6},
	colTry:       {title: "TRY", min: 3, max: 5, right: true, drop: 1},
	colRetention: {title: "RETENTION", min: 9, max: 9, drop: 2},
}

const (
	// keyReadable is the key width the context columns are given up
	// for. Keys such as "release-00020:deploy" are about this long, and
	// cut much shorter they lose the part that tells one record from the
	// next ("order-00…:charge").
	keyReadable = 20
	// keyComfort is how wide the key grows once the names are whole.
	keyComfort = 24
	// dropForNames is the last drop rank given up for the tool's whole
	// name and a readable key; dropForKey the last given up for a
	// readable key alone: a key cut so short that two records read
	// alike names neither. The tenant (ranked after both) goes only when
	// the minimums do not fit.
	dropForNames = 5
	dropForKey   = 7
)

// growOrder is who gets spare room after the minimums, in turn, up to
// their content: the short columns, the key up to a readable width, the
// names, the deferral, the key up to a comfortable width, the owner, then
// the key takes what is left.
var growOrder = []struct {
	c    col
	upTo int // 0: the content's width
}{{colState, 0}, {colExpires, 0}, {colTry, 0}, {colKey, keyReadable}, {colTenant, 0}, {colTool, 0}, {colDeferred, 0},
	{colKey, keyComfort}, {colOwner, 0}, {colKey, 0}}

const (
	colGap    = 2 // spaces between columns
	markWidth = 2 // the selection marker and its space
)

// rowCells formats one row's cells (untruncated); ages come from the
// row's database time.
func rowCells(r readmodel.Row) [colCount]string {
	var c [colCount]string
	c[colID] = strconv.FormatInt(r.ID, 10)
	c[colTenant] = termtext.Clean(r.Tenant)
	c[colTool] = termtext.Clean(r.Tool)
	c[colKey] = termtext.Clean(r.Key)
	c[colState] = RowStateText(r)
	c[colDeferred] = deferralText(r)
	c[colOwner] = termtext.Clean(r.Owner)
	if c[colOwner] == "" {
		c[colOwner] = "-"
	}
	c[colLeaseAge], c[colExpires] = "-", "-"
	if r.Pending() {
		if !r.LeasedAt.IsZero() {
			c[colLeaseAge] = ShortDuration(r.LeaseAge())
		}
		if !r.LeaseExpiresAt.IsZero() {
			c[colExpires] = Relative(r.LeaseExpiresIn())
		}
	}
	c[colTry] = strconv.Itoa(r.Attempt)
	c[colRetention] = "-"
	if !r.ExpiresAt.IsZero() {
		c[colRetention] = since(r.ExpiresAt, r.DBTime)
	}
	return c
}

// measure is what the layout needs to know of a page: each column's
// width for its title and content, and which columns hold nothing ("-"
// in every row).
type measure struct {
	natural [colCount]int
	empty   [colCount]bool
}

// measureCells measures titles and cells, capped by each column's max.
func measureCells(cells [][colCount]string) measure {
	var m measure
	for i := range columns {
		m.natural[i] = len(columns[i].title)
		m.empty[i] = len(cells) > 0 || columns[i].filled
	}
	for _, row := range cells {
		for i := range row {
			if w := width(row[i]); w > m.natural[i] {
				m.natural[i] = w
			}
			if row[i] != "-" {
				m.empty[i] = false
			}
		}
	}
	for i := range columns {
		m.natural[i] = min(m.natural[i], columns[i].max)
	}
	return m
}

// layoutColumns decides each column's width for a terminal w cells wide;
// 0 means the column is dropped. When room is short, columns with nothing
// to show go first; then columns go in their drop order until the whole
// tool name and a readable key fit (the context columns), until a
// readable key fits (the lease expiry and the tool), until the minimums
// fit (the tenant); the room left grows the columns in growOrder.
func layoutColumns(m measure, w int) [colCount]int {
	var mins, out [colCount]int
	shown := [colCount]bool{}
	for i := range columns {
		mins[i] = min(columns[i].min, m.natural[i])
		shown[i] = !columns[i].filled || !m.empty[i]
	}
	// The id must stay whole: it is how an operator names a record.
	mins[colID] = m.natural[colID]
	// How wide the shown columns are at their minimums, with the tool and
	// the key at least toolW and keyW (up to their content).
	total := func(toolW, keyW int) int {
		t, n := markWidth, 0
		for i := range columns {
			if !shown[i] {
				continue
			}
			cw := mins[i]
			switch col(i) {
			case colTool:
				cw = max(cw, min(m.natural[i], toolW))
			case colKey:
				cw = max(cw, min(m.natural[i], keyW))
			}
			t += cw
			n++
		}
		return t + colGap*max(0, n-1)
	}
	// Room to read: the whole tool name, a good part of the key.
	comfort := func() int { return total(columns[colTool].max, keyComfort) }
	names := func() int { return total(columns[colTool].max, keyReadable) }
	readable := func() int { return total(0, keyReadable) }
	minimums := func() int { return total(0, 0) }
	for i := range columns {
		if comfort() <= w {
			break
		}
		if m.empty[i] && columns[i].drop > 0 {
			shown[i] = false
		}
	}
	for rank := 1; rank <= len(columns); rank++ {
		fits := names() <= w
		switch {
		case rank > dropForKey:
			fits = minimums() <= w
		case rank > dropForNames:
			fits = readable() <= w
		}
		if fits {
			break
		}
		for i := range columns {
			if columns[i].drop == rank {
				shown[i] = false
			}
		}
	}
	spare := w - minimums()
	for i := range columns {
		if shown[i] {
			out[i] = mins[i]
		}
	}
	for _, g := range growOrder {
		c := g.c
		if !shown[c] || spare <= 0 {
			continue
		}
		target := m.natural[c]
		if g.upTo > 0 {
			target = min(target, g.upTo)
		}
		add := min(spare, target-out[c])
		if add > 0 {
			out[c] += add
			spare -= add
		}
	}
	return out
}

// fitCell truncates and pads a cell to its column's width.
func fitCell(c col, s string, w int) string {
	if c == colKey {
		s = truncateMiddle(s, w)
	}
	if columns[c].right {
		return padLeft(s, w)
	}
	return pad(s, w)
}

// dropByRank gives up columns by their drop rank (1 first; 0 never)
// until fits says the shown ones fit. ok is false when even the columns
// that never go do not fit.
func dropByRank(ranks []int, fits func(shown []bool) bool) (shown []bool, ok bool) {
	shown = allShown(len(ranks))
	for rank := 1; !fits(shown); rank++ {
		if rank > len(ranks) {
			return shown, false
		}
		for c, r := range ranks {
			if r == rank {
				shown[c] = false
			}
		}
	}
	return shown, true
}

// allShown is every one of n columns shown.
func allShown(n int) []bool {
	shown := make([]bool, n)
	for c := range shown {
		shown[c] = true
	}
	return shown
}
