package ops

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

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

// LocalKeyring is a Keyring read from a key file (LoadKeyFile): the first
// implementation, for a service that keeps its keys on its own disk. A KMS
// is another Keyring.
type LocalKeyring struct {
	current     string
	fingerprint []string
	keys        map[string][]byte
}

// keyFile is the key file's JSON form:
//
//	{"current": "2026-12", "fingerprint": ["fp-1"],
//	 "keys": {"2026-11": "<base64 of 32 bytes>", "2026-12": "…", "fp-1": "…"}}
type keyFile struct {
	Current     string            `json:"current"`
	Fingerprint []string          `json:"fingerprint"`
	Keys        map[string]string `json:"keys"`
}

// LoadKeyFile reads a LocalKeyring from path. The file must not be
// readable by group or others; every key is 32 bytes in standard base64;
// "current" and every "fingerprint" id must name one of "keys". To rotate,
// add a key, make it current, and keep the old one for as long as records
// sealed under it live (their retention).
func LoadKeyFile(path string) (*LocalKeyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ops: key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("ops: key file %s has mode %v: it must not be readable by group or others (chmod 600)", path, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ops: key file: %w", err)
	}
	var f keyFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("ops: key file %s: %w", path, err)
	}
	keys := make(map[string][]byte, len(f.Keys))
	for id, b64 := range f.Keys {
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("ops: key file %s: key %q is not standard base64", path, id)
		}
		keys[id] = k
	}
	kr, err := NewLocalKeyring(f.Current, f.Fingerprint, keys)
	if err != nil {
		return nil, fmt.Errorf("ops: key file %s: %w", path, err)
	}
	return kr, nil
}

// NewLocalKeyring builds a LocalKeyring from keys in memory (tests, or a
// service that reads its keys elsewhere). current and every fingerprint id
// must name one of keys, each of KeyBytes bytes.
func NewLocalKeyring(current string, fingerprint []string, keys map[string][]byte) (*LocalKeyring, error) {
	kr := &LocalKeyring{current: current, fingerprint: append([]string(nil), fingerprint...), keys: make(map[string][]byte, len(keys))}
	for id, k := range keys {
		if err := checkName("key id", id, maxNameBytes); err != nil {
			return nil, err
		}
		if len(k) != KeyBytes {
			return nil, fmt.Errorf("key %q is %d bytes; keys are %d", id, len(k), KeyBytes)
		}
		kr.keys[id] = bytes.Clone(k)
	}
	if _, ok := kr.keys[current]; !ok {
		return nil, fmt.Errorf("the current key %q is not one of the keys", current)
	}
	if len(fingerprint) == 0 {
		return nil, errors.New("no fingerprint key: name at least one")
	}
	for _, id := range fingerprint {
		if _, ok := kr.keys[id]; !ok {
			return nil, fmt.Errorf("the fingerprint key %q is not one of the keys", id)
		}
	}
	return kr, nil
}

// CurrentKeyID implements Keyring.
func (k *LocalKeyring) CurrentKeyID() string { return k.current }

// FingerprintKeyIDs implements Keyring.
func (k *LocalKeyring) FingerprintKeyIDs() []string { return k.fingerprint }

// Key implements Keyring.
func (k *LocalKeyring) Key(id string) ([]byte, error) {
	key, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("key id %q is not in this keyring", id)
	}
	return key, nil
}

// ErrNotDecrypted: a stored value is sealed (Config.Keyring) and could not
// be opened: its key id is not in the keyring, it does not authenticate
// (altered, or moved from another record), or the store has no keyring.
// The stored outcome stands; the replay has no result to give until the
// key is back. See *NotDecryptedError.
var ErrNotDecrypted = errors.New("stored value not decrypted")

// NotDecryptedError is a sealed stored value that could not be opened.
type NotDecryptedError struct {
	Identity
	OperationID int64
	// Field is "result" (or "rejection") or "intent".
	Field string
	// KeyID is the key id the value names.
	KeyID string
	Err   error
}

func (e *NotDecryptedError) Error() string {
	return fmt.Sprintf("operation %s (%d): the stored %s is encrypted under key id %q and was not decrypted: %v",
		e.Identity, e.OperationID, e.Field, e.KeyID, e.Err)
}

func (e *NotDecryptedError) Unwrap() error { return e.Err }

func (e *NotDecryptedError) Is(target error) bool { return target == ErrNotDecrypted }

// errNotAuthentic is what opening a value that was altered, or sealed for
// another record or field, fails with.
var errNotAuthentic = errors.New("the ciphertext does not authenticate: it was altered, or moved from another record")

// envelopeTag is the value of a sealed value's "opsdesk" member. Like the
// result-not-stored marker, it is an object people and the console can
// read as JSON (the columns are json): only the ciphertext is opaque.
const envelopeTag = "encrypted"

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
const envelopePrefix = `{"opsdesk":"` + envelopeTag + `","alg":"` + envelopeAlg + `","kid":`

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
	if json.Unmarshal(stored, &env) != nil || env.Opsdesk != envelopeTag || env.Alg != envelopeAlg {
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

// seal encrypts plain for field of id under the keyring's current key.
func seal(kr Keyring, field string, id Identity, plain []byte) ([]byte, error) {
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
	js, err := json.Marshal(envelope{Opsdesk: envelopeTag, Alg: envelopeAlg, KeyID: kid, CT: ct})
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

// envelopeShaped tells whether a value stored as it is would read back as
// sealed: a result that begins as the library's envelopes do.
func envelopeShaped(js []byte) bool { return bytes.HasPrefix(js, []byte(envelopePrefix)) }

// fingerprintKey derives the HMAC key of fingerprints from a keyring key,
// so that no key serves both AES-GCM and HMAC.
func fingerprintKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("opsdesk fingerprint v1"))
	return m.Sum(nil)
}

// keyedFingerprint is the HMAC-SHA-256 of canon under keyring key id.
func keyedFingerprint(kr Keyring, id string, canon []byte) (Fingerprint, error) {
	key, err := kr.Key(id)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint key: %w", err)
	}
	if len(key) != KeyBytes {
		return Fingerprint{}, fmt.Errorf("fingerprint key %q is %d bytes; keys are %d", id, len(key), KeyBytes)
	}
	m := hmac.New(sha256.New, fingerprintKey(key))
	m.Write(canon)
	var fp Fingerprint
	copy(fp[:], m.Sum(nil))
	return fp, nil
}

// sameIntent tells whether a record's fingerprint is this call's intent:
// its own fingerprint, or, only on a mismatch, the same canonical intent
// fingerprinted as the record may have been, plain SHA-256 (written before
// encryption was on) or under a retired fingerprint key.
func (c *call) sameIntent(fp Fingerprint) bool {
	if fp == c.fingerprint {
		return true
	}
	if c.keyring == nil {
		return false
	}
	if fp == sha256.Sum256(c.canonical) {
		return true
	}
	ids := c.keyring.FingerprintKeyIDs()
	for i := 1; i < len(ids); i++ {
		if old, err := keyedFingerprint(c.keyring, ids[i], c.canonical); err == nil && old == fp {
			return true
		}
	}
	return false
}

// storedIntent is the intent as the record keeps it: the canonical
// request, sealed when the store has a keyring.
func (c *call) storedIntent() ([]byte, error) {
	if c.keyring == nil {
		return c.canonical, nil
	}
	if c.sealedIntent == nil {
		js, err := seal(c.keyring, "intent", c.Identity, c.canonical)
		if err != nil {
			return nil, err
		}
		c.sealedIntent = js
	}
	return c.sealedIntent, nil
}

// storedResult is a result or rejection payload as the record keeps it.
func (c *call) storedResult(js []byte) ([]byte, error) {
	if c.keyring == nil || js == nil {
		return js, nil
	}
	return seal(c.keyring, "result", c.Identity, js)
}

// openResult is a stored result's plaintext, for a replay.
func (c *call) openResult(rec *Record, stored []byte) ([]byte, error) {
	if stored == nil {
		return nil, nil
	}
	plain, kid, err := open(c.keyring, "result", c.Identity, stored)
	if err != nil {
		field := "result"
		if rec.Outcome == OutcomeRejected {
			field = "rejection"
		}
		return nil, &NotDecryptedError{Identity: c.Identity, OperationID: rec.ID, Field: field, KeyID: kid, Err: err}
	}
	return plain, nil
}

// checkKeyring checks what New can without I/O: that the current key and
// every fingerprint key are there and of the right size.
func checkKeyring(kr Keyring) error {
	if kr == nil {
		return nil
	}
	if nilInside(kr) {
		return fmt.Errorf("a nil %T: build it (LoadKeyFile), or leave Keyring unset for no encryption", kr)
	}
	ids := kr.FingerprintKeyIDs()
	if len(ids) == 0 {
		return errors.New("it names no fingerprint key")
	}
	for _, id := range append([]string{kr.CurrentKeyID()}, ids...) {
		key, err := kr.Key(id)
		if err != nil {
			return err
		}
		if len(key) != KeyBytes {
			return fmt.Errorf("key %q is %d bytes; keys are %d", id, len(key), KeyBytes)
		}
	}
	return nil
}
