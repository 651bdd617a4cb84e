package ops

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"

	"github.com/opsdesk/opsdesk/ops/opsmodel"

	"github.com/jackc/pgx/v5/pgconn"
)

// Size limits of what a call stores, by default. Config.MaxIntentBytes
// and Config.MaxResultBytes change them.
const (
	// DefaultMaxIntentBytes bounds a request's canonical intent.
	DefaultMaxIntentBytes = 256 << 10
	// DefaultMaxResultBytes bounds a result or rejection payload as JSON.
	DefaultMaxResultBytes = 1 << 20
)

// MaxIntentBytes is the most a canonical intent may take in this store
// (Config.MaxIntentBytes, default applied): a middleware that builds
// intents from requests sizes them by it.
func (s *Store) MaxIntentBytes() int { return s.maxIntent }

// MaxResultBytes is the most a result or rejection payload may take as
// JSON in this store (Config.MaxResultBytes, default applied): a
// middleware that stores answers sizes them by it.
func (s *Store) MaxResultBytes() int { return s.maxResult }

// maxStorableBytes is the largest limit a Config may set (PostgreSQL's
// jsonb held at most 2^28-1 bytes; json, up to 1 GB, is kept to the same).
const maxStorableBytes = 1<<28 - 1

// maxRefBytes bounds a result reference, as people's decisions bound the
// ones they record.
const maxRefBytes = 500

// limit returns v, or def when v is zero; a negative or oversized v is an
// error naming the Config field.
func limit(field string, v, def int) (int, error) {
	switch {
	case v == 0:
		return def, nil
	case v < 0:
		return 0, fmt.Errorf("Config.%s is %d: it must not be negative (0 is the default, %d)", field, v, def)
	case v > maxStorableBytes:
		return 0, fmt.Errorf("Config.%s is %d: the store holds at most %d bytes per value", field, v, maxStorableBytes)
	}
	return v, nil
}

// nulEscape is the JSON escape of U+0000, which PostgreSQL cannot hold in
// text (SQLSTATE 22P05): intents, whose canonical form the console and the
// people's functions read as text, refuse it. Results and payloads are
// stored as json text and may contain it.
const nulEscape = `\u0000`

// storeRefused tells whether a write failed because PostgreSQL refused
// the value itself: a character it cannot hold or translate into the
// database's encoding, bytes that are not UTF-8, JSON it does not accept,
// nesting past its stack. Nothing was written by that statement, and the
// same value would fail again.
func storeRefused(err error) (code string, ok bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
	switch pgErr.Code {
	case pgerrcode.UntranslatableCharacter,
		pgerrcode.CharacterNotInRepertoire,
		pgerrcode.InvalidTextRepresentation,
		pgerrcode.NumericValueOutOfRange,
		pgerrcode.StatementTooComplex: // stack depth
		return pgErr.Code, true
	}
	return "", false
}

// ErrResultNotStored: an earlier attempt's external effect succeeded, but
// its result could not be stored as it was (over Config.MaxResultBytes, or
// JSON the store refuses), so the record keeps a marker in its place and
// the replay has no result to give. The effect happened: do not run it
// again. See *ResultNotStoredError for the reference and what was lost.
var ErrResultNotStored = errors.New("result not stored")

// ResultNotStored describes a result (or rejection payload) of an external
// call that was not stored as it was. The record holds a small marker
// instead, with the result's reference (ResultReferencer) if it had one,
// so that the operation completes and is never run again.
type ResultNotStored struct {
	// Reason says why, such as "is 1048577 bytes, over the limit of
	// 1048576 (Config.MaxResultBytes)".
	Reason string `json:"reason"`
	// Bytes is the size of the result as JSON, and SHA256 the hex SHA-256
	// of that JSON, to match it with a copy kept elsewhere. Both are zero
	// when the result could not even be encoded.
	Bytes  int    `json:"bytes,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// markerTag is the value of the marker's "opsdesk" member: the stored
// result is a marker when its top level is an object whose "opsdesk"
// member is this string.
const markerTag = "result not stored"

// marker is what the record stores in place of a result not stored.
type marker struct {
	Opsdesk string `json:"opsdesk"`
	ResultNotStored
}

// newNotStored describes result js (nil when it could not be encoded).
func newNotStored(js []byte, reason string) *ResultNotStored {
	n := &ResultNotStored{Reason: reason}
	if js != nil {
		sum := sha256.Sum256(js)
		n.Bytes, n.SHA256 = len(js), hex.EncodeToString(sum[:])
	}
	return n
}

// markerJSON is the marker stored for n.
func markerJSON(n *ResultNotStored) []byte {
	js, err := json.Marshal(marker{Opsdesk: markerTag, ResultNotStored: *n})
	if err != nil {
		// Strings and numbers only: it cannot fail.
		panic(fmt.Sprintf("ops: encode the result-not-stored marker: %v", err))
	}
	return js
}

// storedMarker reads the marker in a stored result, if it is one. Only a
// result that contains the tag is decoded: the store writes it without
// escapes.
func storedMarker(stored []byte) (*ResultNotStored, bool) {
	if !bytes.Contains(stored, []byte(`"`+markerTag+`"`)) || !isMarker(stored) {
		return nil, false
	}
	var m marker
	if err := json.Unmarshal(stored, &m); err != nil {
		return nil, false
	}
	return &m.ResultNotStored, true
}

// markerShaped tells whether a result about to be stored would read back
// as a marker. Its bytes may spell the tag with escapes, which the store
// does not keep.
func markerShaped(js []byte) bool {
	if !bytes.Contains(js, []byte(`"`+markerTag+`"`)) && !bytes.Contains(js, []byte(`\u`)) {
		return false
	}
	return isMarker(js)
}

// isMarker tells whether js is an object whose "opsdesk" member (exactly
// that name; the last one if repeated, as jsonb keeps it) is the tag.
func isMarker(js []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		return false
	}
	var tag string
	return json.Unmarshal(top["opsdesk"], &tag) == nil && tag == markerTag
}

// ResultNotStoredError is the replay of an external effect that succeeded
// but whose result was not stored. The Reply returned with it carries
// the record's OperationID, Attempt and ResultRef; its Result is zero.
type ResultNotStoredError struct {
	Identity
	OperationID int64
	// ResultRef is the provider's reference for the effect, when the
	// result carried one or an operator recorded it.
	ResultRef string
	ResultNotStored
}

func (e *ResultNotStoredError) Error() string {
	ref := "no reference was recorded"
	if e.ResultRef != "" {
		ref = "its reference is " + strconv.Quote(e.ResultRef)
	}
	return fmt.Sprintf("operation %s (%d) took effect in an earlier attempt, but its result was not stored (it %s): "+
		"the replay has no result; %s", e.Identity, e.OperationID, e.Reason, ref)
}

func (e *ResultNotStoredError) Is(target error) bool { return target == ErrResultNotStored }

// encoded is a result or rejection payload ready to store.
type encoded struct {
	// js is the value as JSON (nil when it could not be encoded), stored
	// unless notStored is set: then the record stores the marker.
	js        []byte
	ref       *string
	notStored *ResultNotStored
	// refProblem says why the result's reference cannot be stored ("" if
	// it can); the reference is then left out of the record.
	refProblem string
}

// stored is what the record keeps.
func (e *encoded) stored() []byte {
	if e.notStored != nil {
		return markerJSON(e.notStored)
	}
	return e.js
}

// encode marshals a result or rejection payload and checks that the
// store can hold it within maxBytes. It does not fail: what cannot be
// stored is described in notStored and refProblem, for the caller to
// refuse (DoTx) or to replace with a marker (DoExternal).
func encode(v any, maxBytes int) *encoded {
	e := &encoded{}
	if r, ok := v.(ResultReferencer); ok {
		ref := r.ResultRef()
		if e.refProblem = unstorableRef(ref); e.refProblem == "" {
			e.ref = &ref
		}
	}
	js, err := json.Marshal(v)
	if err != nil {
		// The error's text may quote the value: keep it out of the record.
		e.notStored = newNotStored(nil, fmt.Sprintf("cannot be encoded as JSON (%T)", v))
		return e
	}
	e.js = js
	switch {
	case len(js) > maxBytes:
		e.notStored = newNotStored(js, fmt.Sprintf("is %d bytes, over the limit of %d (Config.MaxResultBytes)", len(js), maxBytes))
	case markerShaped(js):
		e.notStored = newNotStored(js, `has the shape opsdesk keeps for a result not stored (an "opsdesk" member of `+
			strconv.Quote(markerTag)+")")
	case opsmodel.EnvelopeShaped(js):
		e.notStored = newNotStored(js, `has the shape opsdesk keeps for an encrypted value (an "opsdesk" member of `+
			strconv.Quote(opsmodel.EnvelopeTag)+")")
	case !utf8.Valid(js): // only a json.RawMessage can carry such bytes
		e.notStored = newNotStored(js, "is not valid UTF-8")
	}
	return e
}

// unstorableRef says why a result reference cannot be stored, or "".
func unstorableRef(ref string) string {
	switch {
	case len(ref) > maxRefBytes:
		return fmt.Sprintf("is %d bytes, the limit is %d", len(ref), maxRefBytes)
	case !utf8.ValidString(ref):
		return "is not valid UTF-8"
	case bytes.IndexByte([]byte(ref), 0) >= 0:
		return "contains U+0000, which PostgreSQL cannot store"
	}
	return ""
}

// refuse is DoTx's answer to a value it cannot store: field is "result"
// or "rejection". fn ran, but nothing commits.
func (e *encoded) refuse(field string) error {
	var problem string
	switch {
	case e.notStored != nil:
		problem = e.notStored.Reason
	case e.refProblem != "":
		field, problem = "result_ref", "(ResultRef) "+e.refProblem
	default:
		return nil
	}
	return &InvalidRequestError{Field: field, Problem: problem +
		"; fn ran but nothing was committed: its writes were rolled back, and a retry runs it again"}
}

// refusedByStore is refuse for a value the server refused at the write.
func refusedByStore(field, code string) error {
	return &InvalidRequestError{Field: field, Problem: "was refused by the store (SQLSTATE " + code + ")" +
		"; fn ran but nothing was committed: its writes were rolled back, and a retry runs it again"}
}
