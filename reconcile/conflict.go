package reconcile

import (
	"encoding/json"
	"strconv"

	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

// ConflictSide is one of a conflict's two requests, as revealed.
type ConflictSide struct {
	// Request is the canonical request as the library stored it (the
	// RFC 8785 text of {intent, tool, version}); nil when it was not
	// recorded.
	Request json.RawMessage `json:"request"`
	// NotRecorded says why Request is nil, such as "not recorded:
	// conflict 7 predates migration 00019 …".
	NotRecorded string `json:"not_recorded,omitempty"`
	// Fingerprinted tells whether Request hashes (SHA-256) to the
	// fingerprint recorded for this side: it is the request that was
	// compared, not another one written beside the fingerprint.
	Fingerprinted bool `json:"fingerprinted"`
	// KeyID is the key id a request sealed at rest by the service
	// (ops.Config.Keyring) names; "" for one stored plain.
	KeyID string `json:"key_id,omitempty"`
	// Decrypted tells whether Request is a sealed request's plaintext,
	// opened here with the context's keys (OpenSealed): its seal
	// authenticates it as written for this record by a holder of the key.
	// Sealed says why a sealed request was not opened.
	Decrypted bool   `json:"decrypted,omitempty"`
	Sealed    string `json:"sealed,omitempty"`
}

// open decrypts the side where kr holds its key; field is what the
// library sealed it as ("intent", or "conflict" for a refused attempt).
func (s *ConflictSide) open(kr opsmodel.Keyring, field string, id opsmodel.Identity) {
	kid, sealed := opsmodel.EncryptedKeyID(s.Request)
	if !sealed {
		return
	}
	s.KeyID = kid
	if kr == nil {
		s.Sealed = "this context has no reveal_keys"
		return
	}
	if _, err := kr.Key(kid); err != nil {
		s.Sealed = "this context's reveal_keys hold no key " + strconv.Quote(kid)
		return
	}
	plain, _, err := opsmodel.OpenStored(kr, field, id, s.Request)
	if err != nil {
		s.Sealed = "it does not open with this context's key " + strconv.Quote(kid) + " (altered, or moved from another record)"
		return
	}
	s.Request, s.Decrypted, s.Sealed = plain, true, ""
}

// ConflictReveal is what a reveal of a conflict gives: the record's
// original request, the refused attempt's, and the fields that differ.
type ConflictReveal struct {
	ConflictID int64        `json:"conflict_id"`
	Original   ConflictSide `json:"original"`
	Attempted  ConflictSide `json:"attempted"`
	// Diffs are the differing fields (DiffRequests), when both requests
	// were recorded; DiffError says why they could not be computed
	// otherwise.
	Diffs     []Diff `json:"differences"`
	DiffError string `json:"differences_error,omitempty"`
}

// OpenSealed decrypts the requests the service sealed at rest where kr
// (the context's reveal_keys; nil: none) holds their key, id being the
// record's identity they are bound to, and compares them again. A request
// that stays sealed says why (ConflictSide.Sealed).
func (r *ConflictReveal) OpenSealed(kr opsmodel.Keyring, id opsmodel.Identity) {
	r.Original.open(kr, "intent", id)
	r.Attempted.open(kr, "conflict", id)
	r.Compare()
}

// Compare sets Diffs to the fields that differ between the two sides
// (DiffRequests), or DiffError to why they cannot be computed: a side not
// recorded, encrypted at rest by the service (ops.Config.Keyring), or not
// JSON.
func (r *ConflictReveal) Compare() {
	r.Diffs, r.DiffError = nil, ""
	origKey, origSealed := opsmodel.EncryptedKeyID(r.Original.Request)
	attKey, attSealed := opsmodel.EncryptedKeyID(r.Attempted.Request)
	switch {
	case origSealed || attSealed:
		kid := origKey
		if !origSealed {
			kid = attKey
		}
		why := r.Original.Sealed
		if !origSealed {
			why = r.Attempted.Sealed
		}
		if why == "" {
			why = "opsdesk holds no key to decrypt them"
		}
		r.DiffError = "no differences to compute: the requests are encrypted at rest (key id " + strconv.Quote(kid) + "), and " + why
	case r.Original.Request == nil:
		r.DiffError = "no differences to compute: the original request is " + r.Original.NotRecorded
	case r.Attempted.Request == nil:
		r.DiffError = "no differences to compute: the attempted request is " + r.Attempted.NotRecorded
	default:
		var err error
		if r.Diffs, err = DiffRequests(r.Original.Request, r.Attempted.Request); err != nil {
			r.DiffError = "no differences to compute: " + err.Error()
		}
	}
}
