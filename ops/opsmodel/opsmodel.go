// Package opsmodel is the library's vocabulary that needs no database: an
// operation's Identity, its Effect, the Keyring of envelope encryption and
// the envelope itself (Seal, OpenStored, EncryptedKeyID), and the two
// instants an out-of-range time reads as (Infinity, NegativeInfinity).
// The console and the read model use it without depending on pgx; package
// ops re-exports every name here (type aliases, constants and variables),
// so services keep writing ops.Identity, ops.EffectLocal and ops.Keyring.
package opsmodel

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Identity names one operation: the same identity is the same operation.
type Identity struct {
	Tenant string
	Tool   string
	// Key is the caller's idempotency key. It identifies the intent; it is
	// not part of it.
	Key string
}

func (id Identity) String() string { return id.Tenant + "/" + id.Tool + "/" + id.Key }

// Effect says where an operation's effect happens, and so what is safe to do
// with an attempt whose outcome nobody observed.
type Effect string

const (
	// EffectLocal is a write to the same PostgreSQL database, committed in
	// one transaction with the record. An abandoned attempt left nothing
	// behind, so takeover is always safe.
	EffectLocal Effect = "local"
	// EffectIdempotentProvider is an external call to a provider that
	// honours the operation's key as its idempotency key: calling it again
	// with the same key cannot apply the effect twice, so an expired lease
	// is taken over automatically.
	EffectIdempotentProvider Effect = "external_idempotent"
	// EffectUnknownOutcome is an external call whose outcome cannot be
	// deduplicated by the provider. An expired lease means nobody knows
	// whether the effect happened: a person must reconcile it.
	EffectUnknownOutcome Effect = "external_unknown"
)

// Valid tells whether e is one of the three effects.
func (e Effect) Valid() bool {
	switch e {
	case EffectLocal, EffectIdempotentProvider, EffectUnknownOutcome:
		return true
	}
	return false
}

// Keyring supplies the keys of a store's envelope encryption
// (Config.Keyring). Every key is 32 bytes: AES-256-GCM keys for stored
// values, HMAC-SHA-256 keys for fingerprints. The library asks on every
// call, so a keyring may change its keys while the service runs.
//
// Rotation never rewrites a record: each stored value names the key id it
// was sealed under, so a keyring that still holds an old key id keeps
// opening what was written under it, while new values use CurrentKeyID.
type Keyring interface {
	// CurrentKeyID names the key new intents and results are sealed under.
	CurrentKeyID() string
	// Key returns the key named id. An id the keyring does not hold is an
	// error: the value sealed under it cannot be opened.
	Key(id string) ([]byte, error)
	// FingerprintKeyIDs names the keys fingerprints are keyed with: the
	// first keys new records; the others are tried only when a retry's
	// fingerprint differs from its record's, so that records fingerprinted
	// under a retired key still replay (and still detect conflicts).
	FingerprintKeyIDs() []string
}

// KeyBytes is the length of every key a Keyring holds.
const KeyBytes = 32

// errNotAuthentic is what opening a value that was altered, or sealed for
// another record or field, fails with.
var errNotAuthentic = errors.New("the ciphertext does not authenticate: it was altered, or moved from another record")

// EnvelopeTag is the value of a sealed value's "opsdesk" member. Like the
// result-not-stored marker, it is an object people and the console can
// read as JSON (the columns are json): only the ciphertext is opaque.
const EnvelopeTag = "encrypted"

// envelope is a sealed value as stored:
//
//	{"opsdesk":"encrypted","alg":"A256GCM","kid":"2026-12","ct":"<base64 of nonce‖ciphertext‖tag>"}
type envelope struct {
	Opsdesk string `json:"opsdesk"`
	Alg     string `json:"alg"`
	KeyID   string `json:"kid"`
	CT      []byte `json:"ct"` // standard base64 in JSON
}

const envelopeAlg = "A256GCM"

// envelopePrefix is how every envelope the library writes begins
// (encoding/json writes the members in envelope's order, and the columns
// keep the text as written). A value is an envelope only if it begins so:
// one spelt otherwise is a plain value, stored and read back as it is.
const envelopePrefix = `{"opsdesk":"` + EnvelopeTag + `","alg":"` + envelopeAlg + `","kid":`

// EncryptedKeyID tells whether a stored value (an intent, result or
// conflicting request, as a reveal shows it) is sealed, and under which key
// id, so that the console can say so instead of showing an opaque value.
// stored may be only the start of the value (a reveal cut after its first
// bytes): the key id comes before the ciphertext.
func EncryptedKeyID(stored []byte) (keyID string, ok bool) {
	if !bytes.HasPrefix(stored, []byte(envelopePrefix)) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(stored[len(envelopePrefix):]))
	if dec.Decode(&keyID) != nil {
		return "", false
	}
	return keyID, true
}

// readEnvelope decodes a sealed value.
func readEnvelope(stored []byte) (envelope, bool) {
	var env envelope
	if !bytes.HasPrefix(stored, []byte(envelopePrefix)) {
		return env, false
	}
	if json.Unmarshal(stored, &env) != nil || env.Opsdesk != EnvelopeTag || env.Alg != envelopeAlg {
		return envelope{}, false
	}
	return env, true
}

// additionalData binds a sealed value to the record and field it was
// sealed for and to its key id: opened anywhere else, it fails. Each part
// is length-prefixed so that no two bindings share their bytes.
func additionalData(field string, id Identity, keyID string) []byte {
	ad := []byte("opsdesk seal v1")
	for _, part := range []string{field, id.Tenant, id.Tool, id.Key, keyID} {
		ad = binary.BigEndian.AppendUint32(ad, uint32(len(part)))
		ad = append(ad, part...)
	}
	return ad
}

// aead is AES-256-GCM over key. GCM's 96-bit random nonces are safe for
// about 2^32 values per key: rotate well before (see README, security).
func aead(key []byte) (cipher.AEAD, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("the key is %d bytes; keys are %d", len(key), KeyBytes)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts plain for field of id under the keyring's current key.
func Seal(kr Keyring, field string, id Identity, plain []byte) ([]byte, error) {
	kid := kr.CurrentKeyID()
	key, err := kr.Key(kid)
	if err != nil {
		return nil, fmt.Errorf("seal the %s: %w", field, err)
	}
	g, err := aead(key)
	if err != nil {
		return nil, fmt.Errorf("seal the %s under key id %q: %w", field, kid, err)
	}
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal the %s: %w", field, err)
	}
	ct := g.Seal(nonce, nonce, plain, additionalData(field, id, kid))
	js, err := json.Marshal(envelope{Opsdesk: EnvelopeTag, Alg: envelopeAlg, KeyID: kid, CT: ct})
	if err != nil {
		return nil, fmt.Errorf("seal the %s: %w", field, err)
	}
	return js, nil
}

// open returns the plaintext of a stored value: the value itself when it
// is not sealed (a record written before encryption was on, or a result
// an operator recorded), else its decryption. kr may be nil.
func open(kr Keyring, field string, id Identity, stored []byte) (plain []byte, keyID string, err error) {
	env, ok := readEnvelope(stored)
	if !ok {
		return stored, "", nil
	}
	if kr == nil {
		return nil, env.KeyID, errors.New("this store has no keyring (Config.Keyring)")
	}
	key, err := kr.Key(env.KeyID)
	if err != nil {
		return nil, env.KeyID, err
	}
	g, err := aead(key)
	if err != nil {
		return nil, env.KeyID, err
	}
	if len(env.CT) < g.NonceSize()+g.Overhead() {
		return nil, env.KeyID, errNotAuthentic
	}
	nonce, ct := env.CT[:g.NonceSize()], env.CT[g.NonceSize():]
	plain, err = g.Open(nil, nonce, ct, additionalData(field, id, env.KeyID))
	if err != nil {
		return nil, env.KeyID, errNotAuthentic
	}
	return plain, env.KeyID, nil
}

// OpenStored opens a stored value as a reveal shows it (the console's and
// the CLI's, whose operator's context holds a keyring): field is "intent"
// or "result" (a rejection is stored as a result), id the record's
// identity, which the value is bound to. A value that is not sealed comes
// back as it is, with keyID "". A sealed one comes back decrypted, with
// the key id it names; or with that key id and an error when kr is nil,
// does not hold the key id, or the value does not authenticate (altered,
// or moved from another record or field). stored must be the whole value.
func OpenStored(kr Keyring, field string, id Identity, stored []byte) (plain []byte, keyID string, err error) {
	return open(kr, field, id, stored)
}

// EnvelopeShaped tells whether a value stored as it is would read back as
// sealed: a result that begins as the library's envelopes do.
func EnvelopeShaped(js []byte) bool { return bytes.HasPrefix(js, []byte(envelopePrefix)) }

// Infinity is how 'infinity', and every time after year 9999, reads:
// the last nanosecond of year 9999, which no timestamptz holds (they have
// microseconds).
var Infinity = time.Date(9999, time.December, 31, 23, 59, 59, 999_999_999, time.UTC)

// NegativeInfinity is how '-infinity', and every time up to the first
// instant of year 1, reads: the first instant of year 0 (1 BC).
var NegativeInfinity = time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC)
