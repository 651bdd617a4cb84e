package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/internal/auditreport"
)

// CheckpointFormat names version 1 of the checkpoint file and starts its
// signed payload.
const CheckpointFormat = "opsdesk-audit-checkpoint-v1"

// Checkpoint is a signed statement, kept outside the database, that at At
// (the database clock) each chain in Chains ended at Seq with Hash. A chain
// that later lacks that record, or holds another at that seq, was cut or
// rewritten, even if it was re-chained afterwards.
type Checkpoint struct {
	Format         string             `json:"format"`
	At             time.Time          `json:"at"`
	Chains         []auditreport.Head `json:"chains"`
	PublicKey      []byte             `json:"public_key"` // the 32-byte ed25519 key, base64
	KeyFingerprint string             `json:"key_fingerprint"`
	Signature      []byte             `json:"signature"` // ed25519 over Payload(), base64
}

// Sign returns a checkpoint of heads at at, signed with key.
func Sign(at time.Time, heads []auditreport.Head, key ed25519.PrivateKey) (*Checkpoint, error) {
	chains := slices.Clone(heads)
	slices.SortFunc(chains, func(a, b auditreport.Head) int { return strings.Compare(a.Tenant, b.Tenant) })
	pub := key.Public().(ed25519.PublicKey)
	c := &Checkpoint{
		Format:         CheckpointFormat,
		At:             at.UTC().Truncate(time.Microsecond),
		Chains:         chains,
		PublicKey:      pub,
		KeyFingerprint: Fingerprint(pub),
	}
	payload, err := c.Payload()
	if err != nil {
		return nil, err
	}
	c.Signature = ed25519.Sign(key, payload)
	return c, nil
}

// Payload is the byte string the signature covers, deterministic and
// independent of the JSON's layout:
//
//	opsdesk-audit-checkpoint-v1\n
//	at <microseconds since the Unix epoch>\n
//	chain <tenant's length in bytes>:<tenant> <seq> <hash, lowercase hex>\n   (one per chain)
//
// with the chains in ascending byte order of tenant, each tenant once.
// Seq and microseconds are decimal. The length prefix keeps a tenant
// holding spaces or newlines unambiguous.
func (c *Checkpoint) Payload() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(CheckpointFormat + "\n")
	b.WriteString("at " + strconv.FormatInt(c.At.UnixMicro(), 10) + "\n")
	for i, h := range c.Chains {
		if i > 0 && strings.Compare(c.Chains[i-1].Tenant, h.Tenant) >= 0 {
			return nil, fmt.Errorf("checkpoint chains are not in ascending tenant order, each once (%q after %q)",
				h.Tenant, c.Chains[i-1].Tenant)
		}
		fmt.Fprintf(&b, "chain %d:%s %d %s\n", len(h.Tenant), h.Tenant, h.Seq, hex.EncodeToString(h.Hash))
	}
	return b.Bytes(), nil
}

// CheckSignature verifies c's signature with pinned, or with the key c
// carries when pinned is nil, and returns the key that verified it. Without
// a pinned key it proves only that c is intact, not who signed it.
func (c *Checkpoint) CheckSignature(pinned ed25519.PublicKey) (ed25519.PublicKey, error) {
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the checkpoint's public key has %d bytes, not %d", len(c.PublicKey), ed25519.PublicKeySize)
	}
	own := ed25519.PublicKey(c.PublicKey)
	if c.KeyFingerprint != Fingerprint(own) {
		return nil, fmt.Errorf("the checkpoint's key fingerprint %s is not its public key's (%s)", c.KeyFingerprint, Fingerprint(own))
	}
	key := own
	if pinned != nil {
		if !own.Equal(pinned) {
			return nil, fmt.Errorf("the checkpoint was signed with key %s, not the expected %s", Fingerprint(own), Fingerprint(pinned))
		}
		key = pinned
	}
	payload, err := c.Payload()
	if err != nil {
		return nil, err
	}
	if !ed25519.Verify(key, payload, c.Signature) {
		return nil, errors.New("the checkpoint's signature does not verify: the file was altered after signing")
	}
	return key, nil
}

// WriteCheckpoint writes c as indented JSON to path, which must not exist:
// an older checkpoint is evidence, never overwritten.
func WriteCheckpoint(path string, c *Checkpoint) error {
	data, err := MarshalCheckpoint(c)
	if err != nil {
		return err
	}
	if err := writeNew(path, 0o644, data); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// MarshalCheckpoint is c as indented JSON with a final newline.
func MarshalCheckpoint(c *Checkpoint) ([]byte, error) {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return append(data, '\n'), nil
}

// ReadCheckpoint reads a checkpoint file. It checks the format, not the
// signature: that is CheckSignature's.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Checkpoint
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s is not an opsdesk audit checkpoint: %w", path, err)
	}
	if c.Format != CheckpointFormat {
		return nil, fmt.Errorf("%s is not an opsdesk audit checkpoint (format %q, want %q)", path, c.Format, CheckpointFormat)
	}
	return &c, nil
}
