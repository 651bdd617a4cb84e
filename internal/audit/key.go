package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Key files are PEM: a PKCS #8 "PRIVATE KEY" (mode 0600) and a PKIX
// "PUBLIC KEY", both ed25519.
const (
	pemPrivateKey = "PRIVATE KEY"
	pemPublicKey  = "PUBLIC KEY"
)

// Fingerprint names a public key: "sha256:" and the lowercase hex SHA-256 of
// its 32 raw bytes.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// GenerateKey writes a new private key to path (mode 0600) and its public
// key to path+".pub", and returns the public key. It refuses to overwrite
// either file (the error wraps fs.ErrExist): a replaced signing key would
// orphan every checkpoint signed with it.
func GenerateKey(path string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	pubPath := path + ".pub"
	if _, err := os.Lstat(pubPath); err == nil {
		return nil, fmt.Errorf("write public key %s: %w", pubPath, os.ErrExist)
	}
	if err := writeNew(path, 0o600, pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der})); err != nil {
		return nil, fmt.Errorf("write private key: %w", err)
	}
	if err := writeNew(pubPath, 0o644, pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: pubDER})); err != nil {
		// Never leave a private key whose public half is someone else's.
		return nil, errors.Join(fmt.Errorf("write public key: %w", err), os.Remove(path))
	}
	return pub, nil
}

// writeNew creates path with perm and data; it fails if path exists.
func writeNew(path string, perm os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return errors.Join(err, os.Remove(path))
	}
	if err := f.Close(); err != nil {
		return errors.Join(err, os.Remove(path))
	}
	return nil
}

// ReadPrivateKey reads a PEM PKCS #8 ed25519 private key.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	if block.Type != pemPrivateKey {
		return nil, fmt.Errorf("%s holds a PEM %q, not a %q", path, block.Type, pemPrivateKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not an ed25519 key", path, key)
	}
	return priv, nil
}

// ReadPublicKey reads a PEM PKIX ed25519 public key, or the public half of
// a private key file.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	if block.Type == pemPrivateKey {
		priv, err := ReadPrivateKey(path)
		if err != nil {
			return nil, err
		}
		return priv.Public().(ed25519.PublicKey), nil
	}
	if block.Type != pemPublicKey {
		return nil, fmt.Errorf("%s holds a PEM %q, not a %q", path, block.Type, pemPublicKey)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not an ed25519 key", path, key)
	}
	return pub, nil
}

func readPEM(path string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s is not a PEM key file", path)
	}
	return block, nil
}
