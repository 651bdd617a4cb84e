package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// HashVersion is the only hash version this package computes.
const HashVersion = 1

// hashDomain starts every version 1 hash, so that no other SHA-256 in
// opsdesk can collide with an audit hash by construction.
const hashDomain = "opsdesk-audit-v1"

// Hash returns r's hash, version 1, computed exactly as opsdesk.audit_hash
// does in migration 00005: SHA-256 over "opsdesk-audit-v1" followed by
// each field below, in this order, as "<length in bytes>:<text>", or "-"
// for NULL. Integers are decimal, at is microseconds since the Unix epoch,
// booleans are "t" or "f", details is the jsonb's text and prev_hash is
// lowercase hex. r.Hash and r.HashVersion are not part of it.
func Hash(r Record) []byte {
	b := make([]byte, 0, 512)
	b = append(b, hashDomain...)
	text := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	nullable := func(s *string) {
		if s == nil {
			b = append(b, '-')
			return
		}
		text(*s)
	}
	integer := func(n *int64) {
		if n == nil {
			b = append(b, '-')
			return
		}
		text(strconv.FormatInt(*n, 10))
	}
	boolean := func(v bool) {
		if v {
			text("t")
		} else {
			text("f")
		}
	}

	text(r.Tenant)
	text(strconv.FormatInt(r.Seq, 10))
	text(r.EventID)
	text(strconv.FormatInt(r.At.UnixMicro(), 10))
	text(r.Role)
	nullable(r.DisplayName)
	text(r.Action)
	text(r.Outcome)
	nullable(r.Tool)
	nullable(r.Key)
	integer(r.OperationID)
	nullable(r.StateBefore)
	nullable(r.StateAfter)
	integer(r.VersionBefore)
	integer(r.VersionAfter)
	nullable(r.Reason)
	nullable(r.EvidenceDigest)
	nullable(r.EvidenceSummary)
	boolean(r.Forced)
	boolean(r.Override)
	nullable(r.Details)
	if r.PrevHash == nil {
		b = append(b, '-')
	} else {
		// An empty, non-NULL bytea is "0:", as encode('', 'hex') is ''.
		text(hex.EncodeToString(r.PrevHash))
	}
	sum := sha256.Sum256(b)
	return sum[:]
}
