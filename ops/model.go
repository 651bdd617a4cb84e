package ops

import "github.com/opsdesk/opsdesk/ops/opsmodel"

// The library's vocabulary that needs no database lives in ops/opsmodel,
// so that the console and the read model need not depend on pgx; these
// are its names as services know them.
type (
	// Identity names one operation: the same identity is the same
	// operation.
	Identity = opsmodel.Identity
	// Effect says where an operation's effect happens.
	Effect = opsmodel.Effect
	// Keyring supplies the keys of a store's envelope encryption
	// (Config.Keyring).
	Keyring = opsmodel.Keyring
)

// The effects (see opsmodel.Effect).
const (
	EffectLocal              = opsmodel.EffectLocal
	EffectIdempotentProvider = opsmodel.EffectIdempotentProvider
	EffectUnknownOutcome     = opsmodel.EffectUnknownOutcome
)

// KeyBytes is the length of every key a Keyring holds.
const KeyBytes = opsmodel.KeyBytes

// seal encrypts plain for field of id under the keyring's current key.
func seal(kr Keyring, field string, id Identity, plain []byte) ([]byte, error) {
	return opsmodel.Seal(kr, field, id, plain)
}
