package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/auditreport"

	"github.com/jackc/pgx/v5"
)

// ExportFormat names version 1 of the export, a file of JSON lines that
// verifies without the database (VerifyExport). Each line is one object
// whose "kind" says what it is:
//
//	export      a segment starts: when (database time), as whom, what
//	record      one audit record, every column the hash covers (Record's
//	            fields; prev_hash and hash in base64, details as the
//	            jsonb's text), each chain's records in seq order
//	checkpoint  a signed checkpoint (Checkpoint's fields)
//	end         the segment ends: its record count and the last record
//	            of each chain it wrote
//
// An export is resumable: a later export of the records after the last
// seq of each chain (ExportOpts.After, from LastSeqs of the earlier file)
// appended to the file is a second segment, and the whole file verifies
// as one trail, every chain linked across the segments.
const ExportFormat = "opsdesk-audit-export-v1"

// The kinds of export lines.
const (
	KindExport     = "export"
	KindRecord     = "record"
	KindCheckpoint = "checkpoint"
	KindEnd        = "end"
)

// ExportHeader starts a segment of an export.
type ExportHeader struct {
	Kind   string    `json:"kind"`
	Format string    `json:"format"`
	At     time.Time `json:"at"` // the database time of the snapshot exported
	// Role, SeesEveryTenant and Tenants are as in Report: the chains the
	// exporting role could see.
	Role            string   `json:"role"`
	SeesEveryTenant bool     `json:"sees_every_tenant"`
	Tenants         []string `json:"tenants"`
	// Tenant is set when one chain was exported.
	Tenant *string `json:"tenant,omitempty"`
	// After is the last seq of each chain that an earlier segment holds:
	// this segment starts after it.
	After map[string]int64 `json:"after,omitempty"`
}

// ExportEnd ends a segment: a file cut short lacks it.
type ExportEnd struct {
	Kind    string `json:"kind"`
	Records int64  `json:"records"`
	// Chains are the last record written of each chain, by tenant.
	Chains []auditreport.Head `json:"chains"`
}

type exportRecord struct {
	Kind string `json:"kind"`
	Record
}

type exportCheckpoint struct {
	Kind string `json:"kind"`
	Checkpoint
}

// ExportOpts narrows Export.
type ExportOpts struct {
	// Tenant, when set, exports that chain only.
	Tenant *string
	// After skips, per chain, the records up to that seq.
	After map[string]int64
	// Checkpoints are written into the export, after the records. Each
	// must be intact (its own key verifies it).
	Checkpoints []*Checkpoint
}

// ExportSummary says what Export wrote.
type ExportSummary struct {
	At      time.Time
	Role    string
	Records int64
	Chains  []auditreport.Head
}

// Export writes one segment of an export of the chains the connected role
// may see (or opts.Tenant's), in one read-only snapshot: a header, the
// records chain by chain in seq order, the checkpoints and an end line.
// It writes as it reads: memory does not grow with the trail.
func Export(ctx context.Context, db TxBeginner, opts ExportOpts, w io.Writer) (ExportSummary, error) {
	var sum ExportSummary
	for i, cp := range opts.Checkpoints {
		if _, err := cp.CheckSignature(nil); err != nil {
			return sum, fmt.Errorf("checkpoint %d of %s: %w", i+1, cp.At.Format(time.RFC3339), err)
		}
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return sum, fmt.Errorf("export audit: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	h := ExportHeader{Kind: KindExport, Format: ExportFormat, Tenant: opts.Tenant, After: opts.After, Tenants: []string{}}
	err = tx.QueryRow(ctx, `
SELECT now(), session_user,
    CASE WHEN has_function_privilege('opsdesk.sees_every_tenant()', 'EXECUTE') THEN opsdesk.sees_every_tenant() ELSE false END,
    CASE WHEN has_function_privilege('opsdesk.visible_tenants()', 'EXECUTE') THEN opsdesk.visible_tenants() ELSE '{}' END`).
		Scan(&h.At, &h.Role, &h.SeesEveryTenant, &h.Tenants)
	if err != nil {
		return sum, readError(h.Role, err)
	}
	slices.Sort(h.Tenants)
	sum.At, sum.Role = h.At, h.Role
	// The chains to read: each from after its resume point, an index
	// range of the primary key.
	chains, err := exportChains(ctx, tx, opts.Tenant)
	if err != nil {
		return sum, readError(h.Role, err)
	}
	// Byte order, as reports list chains, whatever the database's collation.
	slices.SortFunc(chains, func(a, b auditreport.Head) int { return strings.Compare(a.Tenant, b.Tenant) })
	if err := checkResume(chains, opts, h.Role); err != nil {
		return sum, err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(h); err != nil {
		return sum, fmt.Errorf("write export: %w", err)
	}
	for _, c := range chains {
		after := opts.After[c.Tenant]
		if c.Seq <= after {
			continue
		}
		var last *auditreport.Head
		err := Read(ctx, tx, ReadOpts{Tenant: &c.Tenant, AfterSeq: after}, func(r Record) error {
			sum.Records++
			last = &auditreport.Head{Tenant: r.Tenant, Seq: r.Seq, Hash: r.Hash}
			return enc.Encode(exportRecord{Kind: KindRecord, Record: r})
		})
		if err != nil {
			return sum, readError(h.Role, err)
		}
		if last != nil {
			sum.Chains = append(sum.Chains, *last)
		}
	}
	for _, cp := range opts.Checkpoints {
		if err := enc.Encode(exportCheckpoint{Kind: KindCheckpoint, Checkpoint: *cp}); err != nil {
			return sum, fmt.Errorf("write export: %w", err)
		}
	}
	end := ExportEnd{Kind: KindEnd, Records: sum.Records, Chains: sum.Chains}
	if end.Chains == nil {
		end.Chains = []auditreport.Head{}
	}
	if err := enc.Encode(end); err != nil {
		return sum, fmt.Errorf("write export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("write export: %w", err)
	}
	return sum, nil
}

// exportChains returns the chains the role may see (or tenant's), each
// with its last seq, in the database's order of tenant. They come from the
// records, not the head rows: a chain whose head row was deleted is still
// exported, for verification to find it. One index probe per chain finds
// the next tenant (a loose index scan) and another its last seq.
func exportChains(ctx context.Context, tx pgx.Tx, tenant *string) ([]auditreport.Head, error) {
	var rows pgx.Rows
	if tenant != nil {
		rows, _ = tx.Query(ctx, `SELECT $1::text, max(seq) FROM opsdesk.audit WHERE tenant = $1 HAVING count(*) > 0`, *tenant)
	} else {
		rows, _ = tx.Query(ctx, `
WITH RECURSIVE chains(tenant) AS (
    (SELECT tenant FROM opsdesk.audit ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT a.tenant FROM opsdesk.audit a WHERE a.tenant > c.tenant ORDER BY a.tenant LIMIT 1)
    FROM chains c WHERE c.tenant IS NOT NULL
)
SELECT tenant, (SELECT max(a.seq) FROM opsdesk.audit a WHERE a.tenant = c.tenant) FROM chains c WHERE tenant IS NOT NULL`)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditreport.Head, error) {
		var h auditreport.Head
		err := r.Scan(&h.Tenant, &h.Seq)
		return h, err
	})
}

// checkResume refuses an export that would write nothing for a reason the
// caller did not mean: no chain to export (a tenant misspelt, a role that
// sees none), or a chain that ends before where the export resumes (the
// file already holds records the database no longer has, or --since-seq
// is past the chain's end). Each would otherwise read as success.
func checkResume(chains []auditreport.Head, opts ExportOpts, role string) error {
	if len(chains) == 0 {
		return errors.New(noChain(opts.Tenant, role))
	}
	last := make(map[string]int64, len(chains))
	for _, c := range chains {
		last[c.Tenant] = c.Seq
	}
	for _, tenant := range slices.Sorted(maps.Keys(opts.After)) {
		after := opts.After[tenant]
		seq, ok := last[tenant]
		switch {
		case opts.Tenant != nil && tenant != *opts.Tenant:
		case after <= 0 || after <= seq:
		case !ok:
			return fmt.Errorf("the export resumes chain %s after seq %d, but %s: it is gone, or hidden from %s",
				audited.TenantName(tenant), after, noChain(&tenant, role), role)
		default:
			return fmt.Errorf("the export resumes chain %s after seq %d, but the chain ends at seq %d: "+
				"the records after it are gone from the database (verify it), or the seq is past the chain's end",
				audited.TenantName(tenant), after, seq)
		}
	}
	return nil
}

// ExportVerifyOpts anchors VerifyExport.
type ExportVerifyOpts struct {
	// PublicKey pins the key every checkpoint must be signed with. With it
	// a file that no checkpoint vouches for does not verify: whoever
	// removed the checkpoint's line may have cut the tail it signed.
	PublicKey ed25519.PublicKey
	// Checkpoints are kept outside the export, where whoever edits the file
	// cannot reach them. Each must verify, and the export must reach every
	// head each one signed: a chain it lacks, or that it starts after or
	// ends before the signed seq, fails the verification unless Partial.
	Checkpoints []*Checkpoint
	// Partial accepts chains a checkpoint signed that the export does not
	// reach: they are listed as not checked (CheckpointResult.NotChecked).
	Partial bool
}

// ExportReport is the outcome of VerifyExport.
type ExportReport struct {
	// Segments counts the exports the file holds (one, or more appended).
	Segments int `json:"segments"`
	// Reports holds a verification per checkpoint, those in the file first
	// in file order, then those kept outside it, or one without a
	// checkpoint when there is none. Each report's At and Role are the last
	// segment's.
	Reports []*auditreport.Report `json:"reports"`
	// Problem is what is wrong with the file beyond its chains: a segment
	// cut short, an end line that does not match what precedes it, no
	// checkpoint although a key was pinned.
	Problem string `json:"problem,omitempty"`
	// Warning is what the verification could not vouch for although it
	// passed: no checkpoint vouches for the chains' tails.
	Warning string `json:"warning,omitempty"`
	// Break is the first broken record of any report.
	Break *auditreport.Break `json:"first_break"`
	OK    bool               `json:"ok"`
}

// NoCheckpoint says what an export verified without any checkpoint lacks.
const NoCheckpoint = "no checkpoint vouches for the tail: records cut from the end of a chain, " +
	"with the end line made to agree, would not show"

// VerifyExport verifies an export without any database: every record's
// hash and link as Verify does (a chain that starts after seq 1, where its
// segment's header says it resumes, is anchored by its first record's
// prev_hash, and its Chain.From says so; anywhere else the records before
// it are missing), each checkpoint's signature (with opts.PublicKey when
// set), that each chain still holds the heads each checkpoint signed, and
// that every segment is whole (its end line matches its records).
//
// A checkpoint in the file is the exporter's: the chains its header says it
// left out (one tenant exported, or a segment resumed after the signed
// head) are listed as not compared. A checkpoint from opts.Checkpoints is
// not the file's to narrow: every head it signed must be reached, unless
// opts.Partial. Either way a chain it signed that the exporting role could
// not see fails unless opts.Partial, as in Verify.
//
// It reads the file once per checkpoint. A malformed file is an error
// naming the line; a trail that does not verify is a report with OK false.
func VerifyExport(f io.ReadSeeker, opts ExportVerifyOpts) (*ExportReport, error) {
	out := &ExportReport{}
	type anchor struct {
		cp      *Checkpoint
		line    int
		outside bool
	}
	var anchors []anchor
	var last ExportHeader
	err := scanExport(f, func(n int, kind string, line []byte) error {
		switch kind {
		case KindExport:
			out.Segments++
			return strictJSON(line, &last)
		case KindCheckpoint:
			var cp exportCheckpoint
			if err := strictJSON(line, &cp); err != nil {
				return err
			}
			anchors = append(anchors, anchor{cp: &cp.Checkpoint, line: n})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.Segments == 0 {
		return nil, errors.New("not an opsdesk audit export: it has no export line (write one with opsdesk audit export)")
	}
	for _, cp := range opts.Checkpoints {
		anchors = append(anchors, anchor{cp: cp, outside: true})
	}
	var problems []string
	if len(anchors) == 0 {
		anchors = []anchor{{}}
		if opts.PublicKey != nil {
			problems = append(problems, NoCheckpoint+" (a key was pinned, but the export holds no checkpoint and none was given)")
		} else {
			out.Warning = NoCheckpoint
		}
	}
	for _, a := range anchors {
		rep, problem, err := verifyExportOnce(f, a.cp, opts, a.outside)
		if err != nil {
			return nil, err
		}
		if rep.Checkpoint != nil {
			rep.Checkpoint.Line, rep.Checkpoint.Outside = a.line, a.outside
		}
		rep.At, rep.Role, rep.SeesEveryTenant = last.At, last.Role, last.SeesEveryTenant
		rep.Tenants = append([]string{}, last.Tenants...)
		out.Reports = append(out.Reports, rep)
		if problem != "" && !slices.Contains(problems, problem) {
			problems = append(problems, problem)
		}
	}
	out.Problem = strings.Join(problems, "; ")
	out.OK = out.Problem == ""
	for _, rep := range out.Reports {
		if rep.Break != nil && out.Break == nil {
			out.Break = rep.Break
		}
		out.OK = out.OK && rep.OK
	}
	return out, nil
}

// verifyExportOnce reads the file's records through a verifier anchored
// by cp (or none), and checks each segment's end line. outside is whether
// cp was kept outside the file.
func verifyExportOnce(f io.ReadSeeker, cp *Checkpoint, opts ExportVerifyOpts, outside bool) (*auditreport.Report, string, error) {
	rep := &auditreport.Report{Tenants: []string{}, Chains: []auditreport.Chain{}, Partial: opts.Partial}
	signed := map[string]auditreport.Head{}
	var header ExportHeader
	if cp != nil {
		rep.Checkpoint = &auditreport.CheckpointResult{At: cp.At, KeyFingerprint: cp.KeyFingerprint, KeyPinned: opts.PublicKey != nil}
		if _, err := cp.CheckSignature(opts.PublicKey); err != nil {
			rep.Checkpoint.Problem = err.Error()
		} else {
			for _, h := range cp.Chains {
				signed[h.Tenant] = h
			}
		}
	}
	v := newVerifier(rep, signed)
	var problems []string
	var open bool     // a segment started and has not ended
	var records int64 // the open segment's records
	var lastLine int  // the line the open segment started on
	selected := true  // every segment so far exported every chain
	visible := map[string]bool{}
	resumed := map[string]bool{}
	err := scanExport(f, func(n int, kind string, line []byte) error {
		switch kind {
		case KindExport:
			if open {
				problems = append(problems, fmt.Sprintf("the segment of line %d has no end line: it was cut short", lastLine))
			}
			header = ExportHeader{}
			if err := strictJSON(line, &header); err != nil {
				return err
			}
			if header.Format != ExportFormat {
				return fmt.Errorf("format %q is not %q", header.Format, ExportFormat)
			}
			open, records, lastLine = true, 0, n
			if header.Tenant != nil {
				selected = false
				visible[*header.Tenant] = true
			}
			for tenant := range header.After {
				resumed[tenant] = true
			}
			// The header is not signed: a chain it says starts mid-way is
			// reported as anchored there (Chain.From), never as whole.
			v.anchors = header.After
		case KindRecord:
			if !open {
				return errors.New("a record outside a segment (after an end line, before the next export line)")
			}
			var r exportRecord
			if err := strictJSON(line, &r); err != nil {
				return err
			}
			records++
			v.line = n
			return v.add(r.Record)
		case KindEnd:
			if !open {
				return errors.New("an end line outside a segment")
			}
			var end ExportEnd
			if err := strictJSON(line, &end); err != nil {
				return err
			}
			if end.Records != records {
				problems = append(problems, fmt.Sprintf("the segment of line %d holds %d records, but its end line (line %d) says %d: lines were removed or added",
					lastLine, records, n, end.Records))
			}
			v.compareEnd(end.Chains)
			open = false
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if open {
		problems = append(problems, fmt.Sprintf("the segment of line %d has no end line: the file was cut short", lastLine))
	}
	if err := firstLines(f, v.repeats); err != nil {
		return nil, "", err
	}
	// Chains the checkpoint holds that no record was read for: left out
	// by --tenant, not visible to the exporting role, or gone.
	rep.SeesEveryTenant, rep.Tenants = header.SeesEveryTenant, header.Tenants
	// A chain a segment resumed after, without records since, is before
	// the export.
	for tenant := range maps.Keys(signed) {
		switch {
		case v.chains[tenant] != nil:
		case resumed[tenant]:
			rep.Checkpoint.BeforeExport = append(rep.Checkpoint.BeforeExport, tenant)
			delete(signed, tenant)
		case !selected && !visible[tenant]:
			rep.Checkpoint.NotSelected = append(rep.Checkpoint.NotSelected, tenant)
			delete(signed, tenant)
		}
	}
	v.finish()
	v.gone()
	conclude(rep)
	var failed []string
	if c := rep.Checkpoint; c != nil && !opts.Partial {
		// The file's header says what the exporter left out, and a
		// checkpoint in the file is the exporter's too; one kept outside
		// vouches for heads the file must reach, whatever its header says.
		unchecked, why := c.NotVisible, "the exporting role could not see (or they are gone)"
		if outside {
			unchecked, why = c.NotChecked, "the export does not reach"
		}
		if len(unchecked) > 0 {
			failed = append(failed, fmt.Sprintf("the checkpoint signed heads of chains %s, so they were not checked: %s", why, tenantNames(unchecked)))
		}
	}
	if len(rep.Chains) == 0 {
		failed = append(failed, "the export holds no audit chain")
	}
	fail(rep, failed...)
	return rep, strings.Join(problems, "; "), nil
}

// firstLines reads the file again for the line each repeated record
// first appeared on, and says it in the record's break.
func firstLines(f io.ReadSeeker, repeats []*repeat) error {
	if len(repeats) == 0 {
		return nil
	}
	left := slices.Clone(repeats)
	return scanExport(f, func(n int, kind string, line []byte) error {
		if kind != KindRecord || len(left) == 0 {
			return nil
		}
		var r struct {
			Tenant string `json:"tenant"`
			Seq    int64  `json:"seq"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		left = slices.DeleteFunc(left, func(p *repeat) bool {
			if p.brk.Tenant != r.Tenant || p.seq != r.Seq || n >= p.line {
				return false
			}
			p.found(n)
			return true
		})
		return nil
	})
}

// compareEnd checks the chains against a segment's end line: the last
// record of each chain it names must be the one read last.
func (v *verifier) compareEnd(heads []auditreport.Head) {
	for _, h := range heads {
		c := v.chains[h.Tenant]
		if c == nil {
			c = &auditreport.Chain{Tenant: h.Tenant, HeadHash: auditreport.HexBytes{}}
			v.chains[h.Tenant] = c
			v.order = append(v.order, h.Tenant)
		}
		if c.Break != nil {
			continue
		}
		switch {
		case c.HeadSeq < h.Seq:
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: c.HeadSeq + 1, Reason: missing(c.HeadSeq+1, h.Seq) +
				fmt.Sprintf(": the export's end line says the chain ends at seq %d: lines were removed", h.Seq)}
		case c.HeadSeq > h.Seq:
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: h.Seq + 1, Reason: fmt.Sprintf(
				"seq %d: the chain goes on past seq %d, where the export's end line says it ends", h.Seq+1, h.Seq)}
		case !bytes.Equal(c.HeadHash, h.Hash):
			c.Break = &auditreport.Break{Tenant: c.Tenant, Seq: h.Seq, Reason: fmt.Sprintf(
				"seq %d: hash %s is not the %s the export's end line holds", h.Seq, short(c.HeadHash), short(h.Hash))}
		}
	}
}

// maxExportLine bounds one line of an export. PostgreSQL sends no row
// whose text exceeds 1 GiB (MaxAllocSize, also the limit of one field),
// and JSON writes each byte of it as at most 6 (\u003c for '<'), so no
// record line the exporter writes is longer than this. The bound keeps a
// file that is no export (no newline for gigabytes) from taking all the
// memory there is; a line is held whole only while it is read.
const maxExportLine int64 = 6<<30 + 1<<20

// scanExport reads f from its start and calls fn with each line's number
// and kind. Errors name the line. fn must not keep line: its bytes are
// reused for the next.
func scanExport(f io.ReadSeeker, fn func(n int, kind string, line []byte) error) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read export: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var buf []byte
	n := 0
	for {
		var err error
		buf, err = readLine(r, buf[:0])
		if errors.Is(err, io.EOF) && len(buf) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read export after line %d: %w", n, err)
		}
		n++
		line := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(line, &k); err != nil {
			return fmt.Errorf("export line %d is not a JSON object: %w", n, err)
		}
		switch k.Kind {
		case KindExport, KindRecord, KindCheckpoint, KindEnd:
		default:
			return fmt.Errorf("export line %d: unknown kind %q (kinds: export, record, checkpoint, end)", n, k.Kind)
		}
		if err := fn(n, k.Kind, line); err != nil {
			return fmt.Errorf("export line %d (%s): %w", n, k.Kind, err)
		}
	}
}

// readLine appends to buf the next line of r, with its newline (the last
// line may lack one, and then comes with io.EOF), growing buf as the line
// needs, up to maxExportLine.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(buf))+int64(len(chunk)) > maxExportLine {
			return buf, fmt.Errorf("a line longer than %d bytes: no record the exporter writes is that long", maxExportLine)
		}
		buf = append(buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func strictJSON(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// LastSeqs reads an export's last seq of each chain, from its records:
// where an export appended to it resumes (ExportOpts.After). A malformed
// file is an error naming the line.
func LastSeqs(f io.ReadSeeker) (map[string]int64, error) {
	last := map[string]int64{}
	segments := 0
	err := scanExport(f, func(_ int, kind string, line []byte) error {
		switch kind {
		case KindExport:
			segments++
		case KindRecord:
			var r exportRecord
			if err := strictJSON(line, &r); err != nil {
				return err
			}
			last[r.Tenant] = max(last[r.Tenant], r.Seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if segments == 0 {
		return nil, errors.New("not an opsdesk audit export: it has no export line")
	}
	return last, nil
}
