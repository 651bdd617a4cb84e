package ui

import (
	"context"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

// Source is the read API the console needs. *storeview.Store satisfies it;
// tests use a small in-memory one.
type Source interface {
	Overview(ctx context.Context) (readmodel.Overview, error)
	List(ctx context.Context, q readmodel.Query) (readmodel.Page, error)
	// Total counts a list's records; the list asks for it once its page
	// is shown, so that a count never delays a page.
	Total(ctx context.Context, f readmodel.Filter) (readmodel.Count, error)
	Get(ctx context.Context, id int64) (readmodel.Detail, error)
	GetByIdentity(ctx context.Context, tenant, tool, key string) (readmodel.Detail, error)
	Info(ctx context.Context) (readmodel.Info, error)
	// Review is the retention review of the catalog's and the store's
	// tools.
	Review(ctx context.Context, catalog map[string]readmodel.ToolPolicy) (readmodel.Review, error)
	// AuditList is one page of the audit trail, newest first, as far as
	// the role may see it.
	AuditList(ctx context.Context, q readmodel.AuditQuery) (readmodel.AuditPage, error)
	// AuditRecord is one audit record with the check of its hash and its
	// link to the record before.
	AuditRecord(ctx context.Context, tenant string, seq int64) (readmodel.AuditDetail, error)
	// AuditBatches is one page of past bulk runs, newest first, from the
	// audit records the role may see.
	AuditBatches(ctx context.Context, q readmodel.BatchQuery) (readmodel.BatchPage, error)
}

// Refresh bounds and defaults.
const (
	DefaultRefresh = 2 * time.Second
	MinRefresh     = 500 * time.Millisecond
	MaxRefresh     = 60 * time.Second
	DefaultTimeout = 5 * time.Second
	// freezeFor is how long refresh holds after the operator's last
	// movement, so rows do not jump under the cursor.
	freezeFor = 2 * time.Second
)

// Config configure the console.
type Config struct {
	// Context is the configuration context's name, shown in the status bar.
	Context string
	// ReadOnly marks a context whose writes are disabled and hidden.
	ReadOnly bool
	// Refresh is the polling interval (default 2s, bounded to 500ms..60s).
	Refresh time.Duration
	// NoColor forbids colour. NO_COLOR in the environment is honoured
	// whatever this says.
	NoColor bool
	// Timeout bounds each request to the store (default 5s).
	Timeout time.Duration
	// Decider applies people's decisions. Nil, or ReadOnly, means the
	// console offers no write at all: the keys are disabled, so help does
	// not list them.
	Decider Decider
	// Catalog is each tool's retention policy, for the retention review.
	Catalog map[string]readmodel.ToolPolicy
	// Purger runs retention purges from the review, for a role the
	// database lets purge; nil (or ReadOnly) offers none.
	Purger Purger
	// Verifier checks the audit chains for :verify; nil says to run
	// opsdesk audit verify instead.
	Verifier Verifier
	// Bulk runs the bulk reconciliation of a filtered list (R), over the
	// same desk and store as Decider; nil (or no Decider, or ReadOnly)
	// offers none.
	Bulk BulkReconciler
	// Goto is a : command (with or without the colon) the console runs
	// at start as if it were typed, once the database answers: where an
	// alert points (opsdesk --goto). Check it with CheckCommand first; an
	// invalid one is only a note on the overview.
	Goto string
	// RevealKeys, when set (the context's reveal_keys), decrypts the
	// revealed values sealed under one of its key ids, here in the
	// console; the others are shown as stored, with their key id.
	RevealKeys opsmodel.Keyring
	// Report is where Run writes, once the terminal is restored, what the
	// operator quit in the middle of: a bulk run's decisions and batch, a
	// decision that had not answered (nil: standard error).
	Report io.Writer
	// About are lines the help shows under "About this store": where
	// the demo's catalog, provider, exporter and psql are, say.
	About []string
}

// writable tells whether the console may offer writes at all (the role's
// capabilities decide the rest).
func (o Config) writable() bool { return o.Decider != nil && !o.ReadOnly }

func (o Config) withDefaults() Config {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	o.Refresh = min(max(o.Refresh, MinRefresh), MaxRefresh)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// result is an answer from the store to one request of a screen.
type result interface {
	owner() screenID
	sequence() int
	asOf() time.Time
	failure() error
}

type overviewMsg struct {
	seq int
	ov  readmodel.Overview
	err error
}

func (m overviewMsg) owner() screenID { return screenOverview }
func (m overviewMsg) sequence() int   { return m.seq }
func (m overviewMsg) asOf() time.Time { return m.ov.DBTime }
func (m overviewMsg) failure() error  { return m.err }
func (m totalMsg) owner() screenID    { return screenList }
func (m totalMsg) sequence() int      { return m.seq }
func (m totalMsg) asOf() time.Time    { return time.Time{} } // a count carries no clock; its page's does
func (m totalMsg) failure() error     { return m.err }
func (m pageMsg) owner() screenID     { return screenList }
func (m pageMsg) sequence() int       { return m.seq }
func (m pageMsg) asOf() time.Time     { return m.page.DBTime }
func (m pageMsg) failure() error      { return m.err }
func (m detailMsg) owner() screenID   { return screenDetail }
func (m detailMsg) sequence() int     { return m.seq }
func (m detailMsg) asOf() time.Time   { return m.d.DBTime }
func (m detailMsg) failure() error    { return m.err }
func (m connectMsg) owner() screenID  { return screenConnect }
func (m connectMsg) sequence() int    { return m.seq }
func (m connectMsg) asOf() time.Time  { return m.info.DBTime }
func (m connectMsg) failure() error   { return m.err }
func (m connectMsg) reachable() bool  { return reachable(m.info, m.err) }
func (m probeMsg) reachable() bool    { return reachable(m.info, m.err) }
func reachable(i readmodel.Info, err error) bool {
	// Info reads the database time first: a failure after that (an old
	// schema, say) still proves the database answers.
	return err == nil || !i.DBTime.IsZero()
}

type reviewMsg struct {
	seq int
	r   readmodel.Review
	err error
}

func (m reviewMsg) owner() screenID { return screenReview }
func (m reviewMsg) sequence() int   { return m.seq }
func (m reviewMsg) asOf() time.Time { return m.r.DBTime }
func (m reviewMsg) failure() error  { return m.err }

type auditPageMsg struct {
	seq  int
	page readmodel.AuditPage
	err  error
}

func (m auditPageMsg) owner() screenID { return screenAudit }
func (m auditPageMsg) sequence() int   { return m.seq }
func (m auditPageMsg) asOf() time.Time { return m.page.DBTime }
func (m auditPageMsg) failure() error  { return m.err }

type batchesMsg struct {
	seq  int
	page readmodel.BatchPage
	err  error
}

func (m batchesMsg) owner() screenID { return screenBatches }
func (m batchesMsg) sequence() int   { return m.seq }
func (m batchesMsg) asOf() time.Time { return m.page.DBTime }
func (m batchesMsg) failure() error  { return m.err }

type auditRecordMsg struct {
	seq int
	d   readmodel.AuditDetail
	err error
}

func (m auditRecordMsg) owner() screenID { return screenAuditRecord }
func (m auditRecordMsg) sequence() int   { return m.seq }
func (m auditRecordMsg) asOf() time.Time { return m.d.DBTime }
func (m auditRecordMsg) failure() error  { return m.err }

type pageMsg struct {
	seq  int
	page readmodel.Page
	err  error
}

// totalMsg answers a list's count of its filter's records.
type totalMsg struct {
	seq   int
	total readmodel.Count
	err   error
}

type detailMsg struct {
	seq int
	d   readmodel.Detail
	err error
}

// connectMsg answers the Info request made at start and on retries.
type connectMsg struct {
	seq  int
	info readmodel.Info
	err  error
}

// probeMsg answers the Info request made after a failed poll, to tell an
// unreachable database from a failing query.
type probeMsg struct {
	seq  int
	info readmodel.Info
	err  error
}

// tickMsg is the refresh clock; ticks of an older generation (before a
// pause or an interval change) are ignored.
type tickMsg struct{ gen int }

// thawMsg ends the refresh freeze that the movement number seq started.
type thawMsg struct{ seq int }

// fetcher runs the store's reads as commands, each with a timeout. It
// holds no mutable state and is copied into every screen.
type fetcher struct {
	src     Source
	ctx     context.Context
	timeout time.Duration
}

// run calls fn with a bounded context in a command; a panic in the source
// becomes an error rather than a crash.
func run[T any](f fetcher, fn func(context.Context) (T, error), wrap func(T, error) tea.Msg) tea.Cmd {
	return func() (msg tea.Msg) {
		var zero T
		defer func() {
			if r := recover(); r != nil {
				msg = wrap(zero, fmt.Errorf("store read panicked: %v", r))
			}
		}()
		ctx, cancel := context.WithTimeout(f.ctx, f.timeout)
		defer cancel()
		v, err := fn(ctx)
		return wrap(v, err)
	}
}

func (f fetcher) overview(seq int) tea.Cmd {
	return run(f, f.src.Overview, func(ov readmodel.Overview, err error) tea.Msg {
		return overviewMsg{seq: seq, ov: ov, err: err}
	})
}

func (f fetcher) review(seq int, catalog map[string]readmodel.ToolPolicy) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.Review, error) { return f.src.Review(ctx, catalog) },
		func(r readmodel.Review, err error) tea.Msg { return reviewMsg{seq: seq, r: r, err: err} })
}

func (f fetcher) list(seq int, q readmodel.Query) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.Page, error) { return f.src.List(ctx, q) },
		func(p readmodel.Page, err error) tea.Msg { return pageMsg{seq: seq, page: p, err: err} })
}

func (f fetcher) total(seq int, filter readmodel.Filter) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.Count, error) { return f.src.Total(ctx, filter) },
		func(c readmodel.Count, err error) tea.Msg { return totalMsg{seq: seq, total: c, err: err} })
}

func (f fetcher) auditList(seq int, q readmodel.AuditQuery) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.AuditPage, error) { return f.src.AuditList(ctx, q) },
		func(p readmodel.AuditPage, err error) tea.Msg { return auditPageMsg{seq: seq, page: p, err: err} })
}

func (f fetcher) batches(seq int, q readmodel.BatchQuery) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.BatchPage, error) { return f.src.AuditBatches(ctx, q) },
		func(p readmodel.BatchPage, err error) tea.Msg { return batchesMsg{seq: seq, page: p, err: err} })
}

func (f fetcher) auditRecord(seq int, ref auditRef) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.AuditDetail, error) {
		return f.src.AuditRecord(ctx, ref.Tenant, ref.Seq)
	}, func(d readmodel.AuditDetail, err error) tea.Msg { return auditRecordMsg{seq: seq, d: d, err: err} })
}

func (f fetcher) get(seq int, id int64) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.Detail, error) { return f.src.Get(ctx, id) },
		func(d readmodel.Detail, err error) tea.Msg { return detailMsg{seq: seq, d: d, err: err} })
}

func (f fetcher) identity(seq int, id identity) tea.Cmd {
	return run(f, func(ctx context.Context) (readmodel.Detail, error) {
		return f.src.GetByIdentity(ctx, id.Tenant, id.Tool, id.Key)
	}, func(d readmodel.Detail, err error) tea.Msg { return detailMsg{seq: seq, d: d, err: err} })
}

func (f fetcher) connect(seq int) tea.Cmd {
	return run(f, f.src.Info, func(i readmodel.Info, err error) tea.Msg {
		return connectMsg{seq: seq, info: i, err: err}
	})
}

func (f fetcher) probe(seq int) tea.Cmd {
	return run(f, f.src.Info, func(i readmodel.Info, err error) tea.Msg {
		return probeMsg{seq: seq, info: i, err: err}
	})
}

// identity is what a support engineer arrives with.
type identity struct {
	Tenant, Tool, Key string
}

func (i identity) String() string {
	return termtext.Clean(i.Tenant) + "/" + termtext.Clean(i.Tool) + "/" + termtext.Clean(i.Key)
}
