// Package auditreport is the audit trail's verification as reports and
// the console show it: the Report and its Chains, Breaks and checkpoint
// results, the Progress of a run, the Heads a checkpoint signs and what is
// Queued for sealing. internal/audit verifies and fills them in; they need
// no driver, so the console shows them without depending on pgx.
package auditreport

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
)

// Progress is how far Verify got.
type Progress struct {
	// Records were read and checked, of Total: the sum of the visible
	// chains' heads as audit_heads holds them (a broken chain may hold
	// more or fewer records).
	Records, Total int64
	// Chains were begun; Tenant is the chain being read.
	Chains int
	Tenant string
}

// Report is the outcome of Verify.
type Report struct {
	// At is the database time of the snapshot verified.
	At time.Time `json:"at"`
	// Role is the connected role (session_user). SeesEveryTenant and
	// Tenants (as opsdesk.access maps it, '*' for every tenant) are the
	// chains row-level security lets it see; "" is for those who see every
	// tenant.
	Role            string   `json:"role"`
	SeesEveryTenant bool     `json:"sees_every_tenant"`
	Tenants         []string `json:"tenants"`
	// Chains are the chains verified, in ascending byte order of tenant.
	Chains     []Chain           `json:"chains"`
	Checkpoint *CheckpointResult `json:"checkpoint,omitempty"`
	// Partial is whether a partial check was asked for (VerifyOpts.Partial,
	// ExportVerifyOpts.Partial): the checkpoint's chains listed in
	// CheckpointResult.NotChecked were not checked, and that is not a
	// failure.
	Partial bool `json:"partial"`
	// Problem is why the report fails beyond a broken record: chains a
	// checkpoint signed that were not checked (without Partial), or no
	// chain checked at all. Empty when there is none.
	Problem string `json:"problem,omitempty"`
	// Break is the first broken record (the first chain's, in Chains
	// order), or nil. Each chain reports its own first break too.
	Break *Break `json:"first_break"`
	// OK is whether everything verified: at least one chain, no break, no
	// Problem and, with a checkpoint, a signature that verifies.
	OK bool `json:"ok"`
	// Queued is what of the chains the role sees is not sealed yet:
	// entries committed with their changes that the sealer has not given
	// a place in their chain (migration 00023). They are not verified,
	// and not a failure; nil for an export, which holds sealed records
	// only.
	Queued *Queued `json:"queued,omitempty"`
}

// Heads are the verified chains' heads, for a checkpoint.
func (r *Report) Heads() []Head {
	heads := make([]Head, 0, len(r.Chains))
	for _, c := range r.Chains {
		if c.Records > 0 {
			heads = append(heads, Head{Tenant: c.Tenant, Seq: c.HeadSeq, Hash: c.HeadHash})
		}
	}
	return heads
}

// Chain is one tenant's chain as verified.
type Chain struct {
	Tenant  string `json:"tenant"`
	Records int64  `json:"records"`
	// From is set on a chain read from an export that starts after seq 1
	// (a resumed export, or --since-seq): its first record, whose
	// prev_hash anchors the chain, unverified, to the records before it.
	From int64 `json:"from_seq,omitempty"`
	// HeadSeq and HeadHash are the last record's, as stored.
	HeadSeq  int64    `json:"head_seq"`
	HeadHash HexBytes `json:"head_hash"`
	// Checkpoint is the head a checkpoint signed for this chain, and
	// whether the chain still holds it.
	Checkpoint *CheckedHead `json:"checkpoint,omitempty"`
	Break      *Break       `json:"break"`
}

// CheckedHead is a checkpoint's head of one chain.
type CheckedHead struct {
	Seq       int64    `json:"seq"`
	Hash      HexBytes `json:"hash"`
	Confirmed bool     `json:"confirmed"`
}

// CheckpointResult is what Verify made of a checkpoint.
type CheckpointResult struct {
	At             time.Time `json:"at"`
	KeyFingerprint string    `json:"key_fingerprint"`
	// KeyPinned is false when the checkpoint's own key verified it.
	KeyPinned bool `json:"key_pinned"`
	// Problem is why the checkpoint itself does not verify; its heads are
	// then not compared.
	Problem string `json:"problem,omitempty"`
	// NotVisible are chains it holds that the connected role may not see,
	// so they were not compared; NotSelected are those --tenant left out.
	NotVisible  []string `json:"not_visible,omitempty"`
	NotSelected []string `json:"not_selected,omitempty"`
	// BeforeExport are chains of an export that starts after the head the
	// checkpoint signed: not compared.
	BeforeExport []string `json:"before_export,omitempty"`
	// NotChecked are the three lists above in one: the chains the
	// checkpoint signed whose heads were not compared, in ascending order.
	NotChecked []string `json:"not_checked"`
	// Line is the export line that holds the checkpoint (VerifyExport);
	// Outside is set for a checkpoint kept outside the export
	// (ExportVerifyOpts.Checkpoints).
	Line    int  `json:"line,omitempty"`
	Outside bool `json:"outside,omitempty"`
}

// Break is a chain's first broken record.
type Break struct {
	Tenant string `json:"tenant"`
	// Seq is the first record that fails, or the first missing one.
	Seq int64 `json:"seq"`
	// Reason says what is wrong, starting with the seq concerned.
	Reason string `json:"reason"`
}

// Error reads "tenant acme seq 7: hash does not match its contents".
func (b *Break) Error() string { return "tenant " + audited.TenantName(b.Tenant) + " " + b.Reason }

// HexBytes is a digest written as lowercase hex in JSON.
type HexBytes []byte

// MarshalText writes lowercase hex.
func (h HexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

// UnmarshalText reads hex.
func (h *HexBytes) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	if err != nil {
		return fmt.Errorf("not hex: %w", err)
	}
	*h = v
	return nil
}

// String is the lowercase hex.
func (h HexBytes) String() string { return hex.EncodeToString(h) }

// Head is a chain's last record: what a checkpoint signs.
type Head struct {
	Tenant string   `json:"tenant"`
	Seq    int64    `json:"seq"`
	Hash   HexBytes `json:"hash"`
}

// Queued is what of the trail is not sealed yet, in the chains the role
// sees: how many entries, and how long the oldest has waited (by the
// database's clock).
type Queued struct {
	Entries int64         `json:"entries"`
	Oldest  time.Duration `json:"oldest"`
}
