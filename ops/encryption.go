package ops

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

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
	plain, kid, err := opsmodel.OpenStored(c.keyring, "result", c.Identity, stored)
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
