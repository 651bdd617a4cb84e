package opsmodel

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
)

// ProviderKeyPrefix starts every provider key. Its digit is the
// derivation's version: a provider key never changes meaning.
const ProviderKeyPrefix = "opsdesk1_"

// providerKeyDomain separates the derivation's hash from any other use of
// SHA-256 over the same bytes.
const providerKeyDomain = "opsdesk provider key v1\x00"

// providerKeyEncoding is lowercase base32 without padding: letters and
// digits only, the same read by providers that fold case.
var providerKeyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ProviderKey is the idempotency key to send to a provider for this
// operation: ProviderKeyPrefix and the base32 SHA-256 of the whole
// identity (tenant, tool and key, each length-prefixed so that no two
// identities share an encoding). It is the same for every attempt, 61
// characters of [a-z0-9_], fit for a URL path segment, a header and
// Stripe's 255-character limit, whatever the key holds.
//
// Send it whenever a provider account is shared by several tenants or
// tools: two tenants (or tools) with the same raw key then still send
// different keys, and the provider cannot answer one's call with the
// other's. The raw Key is unique only within (tenant, tool); send it
// instead only when the account is the tenant's and the tool's alone and
// you want the provider to show your key.
func (id Identity) ProviderKey() string {
	h := sha256.New()
	h.Write([]byte(providerKeyDomain))
	var n [8]byte
	for _, part := range []string{id.Tenant, id.Tool, id.Key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return ProviderKeyPrefix + providerKeyEncoding.EncodeToString(h.Sum(nil))
}
