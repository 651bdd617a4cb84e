package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/auditreport"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TxBeginner opens transactions: a pool or a connection.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// VerifyOpts narrows and anchors Verify.
type VerifyOpts struct {
	// Tenant, when set, verifies that tenant's chain only ("" is the chain
	// of events outside any tenant).
	Tenant *string
	// Checkpoint, when set, must verify, and every chain it holds must still
	// hold its head: the record at that seq, with that hash.
	Checkpoint *Checkpoint
	// PublicKey pins the key the checkpoint must be signed with. Without
	// it the checkpoint's own key checks its signature, which proves the
	// file intact but not who signed it.
	PublicKey ed25519.PublicKey
	// Partial accepts a check of fewer chains than the checkpoint signed:
	// its chains the role may not see are listed as not checked
	// (CheckpointResult.NotVisible) instead of failing the verification.
	// Without it they fail: whoever can rewrite a chain and its head row
	// can also narrow what the verifying role sees, or delete the chain
	// with its head row, and to a role scoped to other tenants a deleted
	// chain and a hidden one look the same. Tenant implies it for the
	// chains other than Tenant's.
	Partial bool
	// Progress, when set, hears how far the check got: every
	// ProgressEvery records, at each new chain, and once at the end.
	Progress func(auditreport.Progress)
}

// ProgressEvery is how many records Verify reads between two Progress
// calls.
const ProgressEvery = 1000

// ErrNoAccess is a role that may not read the audit trail.
var ErrNoAccess = errors.New("may not read the audit trail: grant it opsdesk_viewer (or a role that has it)")

// Verify checks, in one read-only snapshot, every chain the connected role
// may see (or opts.Tenant's): seq starts at 1 without gaps, hash_version is
// 1, each hash recomputes from its record, and each prev_hash is the
// previous record's hash (none for seq 1). With opts.Checkpoint it also
// checks the checkpoint's signature and that each chain still holds the
// head it signed. Records stream: memory grows with the number of chains,
// not records. A broken chain is a Report with OK false, not an error.
func Verify(ctx context.Context, db TxBeginner, opts VerifyOpts) (*auditreport.Report, error) {
	rep := &auditreport.Report{Tenants: []string{}, Chains: []auditreport.Chain{}, Partial: opts.Partial}
	signed := map[string]auditreport.Head{}
	if cp := opts.Checkpoint; cp != nil {
		rep.Checkpoint = &auditreport.CheckpointResult{At: cp.At, KeyFingerprint: cp.KeyFingerprint, KeyPinned: opts.PublicKey != nil}
		if _, err := cp.CheckSignature(opts.PublicKey); err != nil {
			rep.Checkpoint.Problem = err.Error()
		} else {
			for _, h := range cp.Chains {
				if opts.Tenant != nil && h.Tenant != *opts.Tenant {
					rep.Checkpoint.NotSelected = append(rep.Checkpoint.NotSelected, h.Tenant)
					continue
				}
				signed[h.Tenant] = h
			}
		}
	}

	// Repeatable read: the chains, the database time and the role's view
	// are one snapshot, however long the read takes.
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// The visibility functions are opsdesk_viewer's; asking without the
	// privilege would abort the transaction, so check it first.
	var tenants []string
	err = tx.QueryRow(ctx, `
SELECT now(), session_user,
    CASE WHEN has_function_privilege('opsdesk.sees_every_tenant()', 'EXECUTE') THEN opsdesk.sees_every_tenant() ELSE false END,
    CASE WHEN has_function_privilege('opsdesk.visible_tenants()', 'EXECUTE') THEN opsdesk.visible_tenants() ELSE '{}' END`).
		Scan(&rep.At, &rep.Role, &rep.SeesEveryTenant, &tenants)
	if err != nil {
		return nil, readError(rep.Role, err)
	}
	slices.Sort(tenants)
	rep.Tenants = append(rep.Tenants, tenants...)

	v := newVerifier(rep, signed)
	add := v.add
	if opts.Progress != nil {
		if add, err = progressing(ctx, tx, opts, v); err != nil {
			return nil, readError(rep.Role, err)
		}
	}
	if err := Read(ctx, tx, ReadOpts{Tenant: opts.Tenant}, add); err != nil {
		return nil, readError(rep.Role, err)
	}
	if opts.Progress != nil {
		opts.Progress(v.progress)
	}
	v.finish()
	v.gone()
	heads, err := readHeads(ctx, tx, opts.Tenant)
	if err != nil {
		return nil, readError(rep.Role, err)
	}
	v.compareHeads(heads)
	q, err := ReadQueued(ctx, tx)
	if err != nil {
		return nil, readError(rep.Role, err)
	}
	rep.Queued = &q
	conclude(rep)
	var problems []string
	if cp := rep.Checkpoint; cp != nil && len(cp.NotVisible) > 0 && !opts.Partial {
		problems = append(problems, fmt.Sprintf("the checkpoint signed chains %s cannot see (hidden from it, or gone), so they were not checked: %s",
			rep.Role, tenantNames(cp.NotVisible)))
	}
	if len(rep.Chains) == 0 {
		problems = append(problems, noChain(opts.Tenant, rep.Role))
	}
	fail(rep, problems...)
	return rep, nil
}

// progressing counts the records to read (from the chains' heads) and
// returns v.add reporting its progress to opts.Progress.
func progressing(ctx context.Context, tx pgx.Tx, opts VerifyOpts, v *verifier) (func(Record) error, error) {
	heads, err := readHeads(ctx, tx, opts.Tenant)
	if err != nil {
		return nil, err
	}
	for _, h := range heads {
		v.progress.Total += h.Seq
	}
	opts.Progress(v.progress)
	return func(r Record) error {
		p := &v.progress
		p.Records++
		if r.Tenant != p.Tenant || p.Chains == 0 {
			p.Chains++
			p.Tenant = r.Tenant
			opts.Progress(*p)
		} else if p.Records%ProgressEvery == 0 {
			opts.Progress(*p)
		}
		return v.add(r)
	}, nil
}

// noChain says that no chain was there to check: a tenant misspelt, or a
// role that sees none, must not read as a trail that verified.
func noChain(tenant *string, role string) string {
	if tenant != nil {
		return fmt.Sprintf("no audit chain %s visible to %s", audited.TenantName(*tenant), role)
	}
	return "no audit chain visible to " + role
}

// tenantNames lists chains as reports name them.
func tenantNames(tenants []string) string {
	names := make([]string, len(tenants))
	for i, t := range tenants {
		names[i] = audited.TenantName(t)
	}
	return strings.Join(names, ", ")
}

// conclude orders the chains and the checkpoint's lists, and settles
// Break and OK.
func conclude(rep *auditreport.Report) {
	slices.SortFunc(rep.Chains, func(a, b auditreport.Chain) int { return strings.Compare(a.Tenant, b.Tenant) })
	rep.Break = nil
	for _, c := range rep.Chains {
		if c.Break != nil {
			rep.Break = c.Break
			break
		}
	}
	if cp := rep.Checkpoint; cp != nil {
		slices.Sort(cp.NotVisible)
		slices.Sort(cp.NotSelected)
		slices.Sort(cp.BeforeExport)
		cp.NotChecked = slices.Concat([]string{}, cp.NotVisible, cp.NotSelected, cp.BeforeExport)
		slices.Sort(cp.NotChecked)
		cp.NotChecked = slices.Compact(cp.NotChecked)
	}
	rep.OK = rep.Break == nil && rep.Problem == "" && (rep.Checkpoint == nil || rep.Checkpoint.Problem == "")
}

// fail adds problems to the report's and settles OK.
func fail(rep *auditreport.Report, problems ...string) {
	if rep.Problem != "" {
		problems = append([]string{rep.Problem}, problems...)
	}
	rep.Problem = strings.Join(problems, "; ")
	rep.OK = rep.OK && rep.Problem == ""
}

// readError maps a refused read to ErrNoAccess.
func readError(role string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgerrcode.InsufficientPrivilege {
		if role == "" {
			role = "the connected role"
		}
		return fmt.Errorf("%s %w (%s)", role, ErrNoAccess, pgErr.Message)
	}
	return fmt.Errorf("verify audit: %w", err)
}

// verifier checks records as they stream. Each chain's records come in
// seq order; chains may interleave (concatenated exports do).
type verifier struct {
	rep    *auditreport.Report
	signed map[string]auditreport.Head // the checkpoint's heads still to compare
	chains map[string]*auditreport.Chain
	order  []string // chains in the order first seen
	// progress is how far the check got, for VerifyOpts.Progress.
	progress auditreport.Progress
	// anchors lets a chain start after seq 1, anchored by its first
	// record's prev_hash, where an export says it starts: after the seq
	// anchors holds for its tenant (--since-seq, or a segment appended to
	// an export). Elsewhere a chain must start at seq 1, so that records
	// dropped from the start of a chain are found.
	anchors map[string]int64
	// line is the export line of the record being added; 0 for one read
	// from the database, which come in seq order.
	line int
	// read is, for each chain, what its break needs to say about the
	// records read before: where the last one stands, and the seqs found
	// missing.
	read map[string]*chainRead
	// repeats are the breaks of a record that appears again, not next to
	// its first: VerifyExport reads the file again for where that was.
	repeats []*repeat
}

// chainRead is what a verifier keeps of a chain's records read so far.
type chainRead struct {
	// line is the export line of the chain's last record (0: from the
	// database).
	line int
	// gap is the seqs the chain's break found missing, while that is its
	// break: a record of them that comes later is out of order.
	gap *gap
}

// gap is seqs from to to found missing before record after, on line
// afterLine.
type gap struct {
	from, to, after int64
	afterLine       int
}

// repeat is a record that appears again on line, after record after (on
// afterLine): its break, once VerifyExport found the line it first
// appeared on, says both.
type repeat struct {
	brk             *auditreport.Break
	seq             int64
	line, afterLine int
	after           int64
}

func newVerifier(rep *auditreport.Report, signed map[string]auditreport.Head) *verifier {
	return &verifier{rep: rep, signed: signed, chains: map[string]*auditreport.Chain{}, read: map[string]*chainRead{}}
}

func (v *verifier) add(r Record) error {
	c := v.chains[r.Tenant]
	if c == nil {
		c = &auditreport.Chain{Tenant: r.Tenant}
		if h, ok := v.signed[r.Tenant]; ok {
			c.Checkpoint = &auditreport.CheckedHead{Seq: h.Seq, Hash: h.Hash}
		}
		if after, ok := v.anchors[r.Tenant]; ok && r.Seq > 1 && r.Seq == after+1 {
			c.From, c.HeadSeq, c.HeadHash = r.Seq, r.Seq-1, r.PrevHash
		}
		v.chains[r.Tenant] = c
		v.order = append(v.order, r.Tenant)
		v.read[r.Tenant] = &chainRead{}
	}
	read := v.read[r.Tenant]
	c.Records++
	// Whether the checkpoint's head is still there is worth saying even
	// in a chain broken before it.
	if s := c.Checkpoint; s != nil && r.Seq == s.Seq && bytes.Equal(r.Hash, s.Hash) {
		s.Confirmed = true
	}
	switch g := read.gap; {
	case c.Break == nil:
		c.Break = v.check(c, read, r)
	case g != nil && r.Seq >= g.from && r.Seq <= g.to:
		// A record found missing comes after all: it was moved.
		c.Break = &auditreport.Break{Tenant: r.Tenant, Seq: r.Seq, Reason: fmt.Sprintf("seq %d%s is out of order: seq %d%s comes before it",
			r.Seq, onLine(v.line), g.after, onLine(g.afterLine))}
		read.gap = nil
	}
	c.HeadSeq, c.HeadHash = r.Seq, r.Hash
	read.line = v.line
	return nil
}

// check returns why r does not continue chain c (whose head is r's
// predecessor, read as read says), or nil.
func (v *verifier) check(c *auditreport.Chain, read *chainRead, r Record) *auditreport.Break {
	broken := func(seq int64, reason string) *auditreport.Break {
		return &auditreport.Break{Tenant: r.Tenant, Seq: seq, Reason: reason}
	}
	switch want := c.HeadSeq + 1; {
	case r.Seq == want:
	case r.Seq < 1:
		return broken(r.Seq, fmt.Sprintf("seq %d%s: seqs start at 1", r.Seq, onLine(v.line)))
	case c.HeadSeq == 0:
		read.gap = &gap{from: 1, to: r.Seq - 1, after: r.Seq, afterLine: v.line}
		return broken(1, missing(1, r.Seq-1)+fmt.Sprintf(": the chain starts at seq %d", r.Seq))
	case r.Seq == c.HeadSeq:
		reason := fmt.Sprintf("seq %d appears twice%s", r.Seq, onLines(read.line, v.line))
		if !bytes.Equal(r.Hash, c.HeadHash) {
			reason += ", as two different records"
		}
		return broken(r.Seq, reason)
	case r.Seq < c.From:
		return broken(r.Seq, fmt.Sprintf("seq %d%s is out of order: seq %d%s comes before it, and the export starts the chain after seq %d",
			r.Seq, onLine(v.line), c.HeadSeq, onLine(read.line), c.From-1))
	case r.Seq < c.HeadSeq:
		// Every seq up to the head was read, in order: r's was too.
		b := broken(r.Seq, fmt.Sprintf("seq %d appears again%s, after seq %d%s", r.Seq, onLine(v.line), c.HeadSeq, onLine(read.line)))
		if v.line > 0 {
			v.repeats = append(v.repeats, &repeat{brk: b, seq: r.Seq, line: v.line, after: c.HeadSeq, afterLine: read.line})
		}
		return b
	default:
		read.gap = &gap{from: want, to: r.Seq - 1, after: r.Seq, afterLine: v.line}
		return broken(want, missing(want, r.Seq-1)+fmt.Sprintf(": %d is followed by %d", c.HeadSeq, r.Seq))
	}
	if r.HashVersion != HashVersion {
		return broken(r.Seq, fmt.Sprintf("seq %d: hash version %d is unknown (this opsdesk verifies version %d)", r.Seq, r.HashVersion, HashVersion))
	}
	if !bytes.Equal(Hash(r), r.Hash) {
		return broken(r.Seq, fmt.Sprintf("seq %d: hash does not match its contents", r.Seq))
	}
	if r.Seq == 1 && r.PrevHash != nil {
		return broken(r.Seq, "seq 1: prev_hash is set, but seq 1 starts the chain and follows nothing")
	}
	if r.Seq > 1 && (r.PrevHash == nil || !bytes.Equal(r.PrevHash, c.HeadHash)) {
		return broken(r.Seq, fmt.Sprintf("prev_hash of seq %d is not the hash of seq %d", r.Seq, r.Seq-1))
	}
	if s := c.Checkpoint; s != nil && r.Seq == s.Seq && !bytes.Equal(r.Hash, s.Hash) {
		return broken(r.Seq, fmt.Sprintf("seq %d: hash %s is not the %s the checkpoint signed: the chain was rewritten at or before seq %d",
			r.Seq, short(r.Hash), short(s.Hash), r.Seq))
	}
	return nil
}

// found says, in the break of a record that appears again, the line it
// first appeared on.
func (p *repeat) found(first int) {
	p.brk.Reason = fmt.Sprintf("seq %d appears twice (lines %d and %d), the second time after seq %d%s",
		p.seq, first, p.line, p.after, onLine(p.afterLine))
}

// onLine is " (line n)" for a record of an export, "" for one read from
// the database.
func onLine(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d)", n)
}

// onLines is " (lines a and b)" for two records of an export.
func onLines(a, b int) string {
	if a == 0 || b == 0 {
		return ""
	}
	return fmt.Sprintf(" (lines %d and %d)", a, b)
}

// missing names the missing seqs from to to (inclusive).
func missing(from, to int64) string {
	if from == to {
		return fmt.Sprintf("seq %d missing", from)
	}
	return fmt.Sprintf("seqs %d to %d missing", from, to)
}

func short(h []byte) string {
	s := auditreport.HexBytes(h).String()
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// finish closes the chains once every record was read: a chain shorter
// than its checkpoint lost its tail.
func (v *verifier) finish() {
	for _, tenant := range v.order {
		c := v.chains[tenant]
		s := c.Checkpoint
		switch {
		case s == nil || c.Break != nil:
		case c.HeadSeq < s.Seq:
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: c.HeadSeq + 1, Reason: missing(c.HeadSeq+1, s.Seq) +
				fmt.Sprintf(": the chain ends at seq %d, but the checkpoint signed seq %d: its tail was removed", c.HeadSeq, s.Seq)}
		case c.From > s.Seq:
			v.rep.Checkpoint.BeforeExport = append(v.rep.Checkpoint.BeforeExport, c.Tenant)
		}
		v.rep.Chains = append(v.rep.Chains, *c)
	}
}

// gone reports the checkpoint's chains that no record was read for: gone
// when the role may see them, else not compared.
func (v *verifier) gone() {
	for tenant, h := range v.signed {
		if v.chains[tenant] != nil {
			continue
		}
		if !v.visible(tenant) {
			v.rep.Checkpoint.NotVisible = append(v.rep.Checkpoint.NotVisible, tenant)
			continue
		}
		v.rep.Chains = append(v.rep.Chains, auditreport.Chain{
			Tenant:     tenant,
			HeadHash:   auditreport.HexBytes{},
			Checkpoint: &auditreport.CheckedHead{Seq: h.Seq, Hash: h.Hash},
			Break: &auditreport.Break{Tenant: tenant, Seq: 1, Reason: missing(1, h.Seq) +
				fmt.Sprintf(": the chain is gone, but the checkpoint signed seq %d", h.Seq)},
		})
	}
}

// visible is whether row-level security lets the role see tenant's chain.
// A role with no tenant mapping at all (a table owner, say) is not a
// scoped person: a chain it does not see counts as gone.
func (v *verifier) visible(tenant string) bool {
	r := v.rep
	if r.SeesEveryTenant || len(r.Tenants) == 0 {
		return true
	}
	return tenant != "" && slices.Contains(r.Tenants, tenant)
}

// readHeads reads the chain heads the role may see: the database moves a
// chain's head row with every append, under the lock that orders it.
func readHeads(ctx context.Context, tx pgx.Tx, tenant *string) ([]auditreport.Head, error) {
	rows, _ := tx.Query(ctx, `SELECT tenant, seq, hash FROM opsdesk.audit_heads WHERE $1::text IS NULL OR tenant = $1`, tenant)
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditreport.Head, error) {
		var h auditreport.Head
		var hash []byte
		err := r.Scan(&h.Tenant, &h.Seq, &hash)
		h.Hash = hash
		return h, err
	})
}

// compareHeads checks each chain against its head row. A tail removed
// from the chain without the head row being rewritten leaves the chain
// short of it; a head row rewritten alone no longer matches the chain; a
// chain with records and no head row, or a head row at seq 0, lost its
// head row. (Rewriting both takes a checkpoint to catch.)
func (v *verifier) compareHeads(heads []auditreport.Head) {
	index := make(map[string]int, len(v.rep.Chains))
	for i, c := range v.rep.Chains {
		index[c.Tenant] = i
	}
	headed := make(map[string]bool, len(heads))
	for _, h := range heads {
		headed[h.Tenant] = true
		i, ok := index[h.Tenant]
		if !ok {
			// A head row at seq 0 with no records is a chain whose first
			// append is under way (or rolled back): nothing to compare.
			if h.Seq != 0 {
				v.rep.Chains = append(v.rep.Chains, auditreport.Chain{Tenant: h.Tenant, HeadHash: auditreport.HexBytes{}, Break: &auditreport.Break{
					Tenant: h.Tenant, Seq: 1, Reason: missing(1, h.Seq) + fmt.Sprintf(": the chain is gone, but its head row says seq %d", h.Seq)}})
			}
			continue
		}
		c := &v.rep.Chains[i]
		switch {
		case c.Break != nil || c.Records == 0:
		case c.HeadSeq < h.Seq:
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: c.HeadSeq + 1, Reason: missing(c.HeadSeq+1, h.Seq) +
				fmt.Sprintf(": the chain ends at seq %d, but its head row says seq %d: its tail was removed", c.HeadSeq, h.Seq)}
		case c.HeadSeq > h.Seq:
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: h.Seq + 1, Reason: fmt.Sprintf(
				"seq %d: the chain goes on to seq %d past its head row at seq %d: the head row was rewritten", h.Seq+1, c.HeadSeq, h.Seq)}
		case !bytes.Equal(c.HeadHash, h.Hash):
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: h.Seq, Reason: fmt.Sprintf(
				"seq %d: hash %s is not the %s its head row holds", h.Seq, short(c.HeadHash), short(h.Hash))}
		}
	}
	// The head row is what vouches for a chain's tail: a chain without one
	// could have lost any number of its last records.
	for i := range v.rep.Chains {
		c := &v.rep.Chains[i]
		if c.Break == nil && c.Records > 0 && !headed[c.Tenant] {
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: c.HeadSeq, Reason: fmt.Sprintf(
				"seq %d: the chain ends at seq %d, but has no head row: the head row was deleted", c.HeadSeq, c.HeadSeq)}
		}
	}
}
