package ops_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

func TestProviderKey(t *testing.T) {
	t.Parallel()
	id := ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "order-7:charge"}

	t.Run("StableAcrossAttempts", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, id.ProviderKey(), id.ProviderKey())
		a1 := ops.Attempt{Identity: id, OperationID: 7, Number: 1}
		a2 := ops.Attempt{Identity: id, OperationID: 7, Number: 2}
		require.Equal(t, a1.ProviderKey(), a2.ProviderKey())
		// Pinned (computed independently, in Python): a provider key
		// never changes meaning between versions.
		require.Equal(t, "opsdesk1_xgfgn5zynzsrlzasi2oygtel6wkgekvphozu5hpsux3avsch3rnq", id.ProviderKey())
	})

	t.Run("TheWholeIdentityCounts", func(t *testing.T) {
		t.Parallel()
		seen := map[string]ops.Identity{}
		for _, other := range []ops.Identity{
			id,
			{Tenant: "globex", Tool: id.Tool, Key: id.Key},        // another tenant, same key
			{Tenant: id.Tenant, Tool: "refund-card", Key: id.Key}, // another tool, same key
			{Tenant: id.Tenant, Tool: id.Tool, Key: "order-8:charge"},
			// Boundaries move, the concatenation stays: still different.
			{Tenant: "ab", Tool: "c", Key: "d"},
			{Tenant: "a", Tool: "bc", Key: "d"},
			{Tenant: "a", Tool: "b", Key: "cd"},
			{Tenant: "a/b", Tool: "c", Key: "d"},
			{Tenant: "a", Tool: "b/c", Key: "d"},
			{Tenant: "a\x00", Tool: "b", Key: "c"},
			{Tenant: "a", Tool: "\x00b", Key: "c"},
			{},
		} {
			k := other.ProviderKey()
			prev, dup := seen[k]
			require.False(t, dup, "%q and %q share provider key %s", prev, other, k)
			seen[k] = other
		}
	})

	t.Run("SafeWhateverTheKeyHolds", func(t *testing.T) {
		t.Parallel()
		safe := regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
		for _, key := range []string{
			"", "\x00", "a\r\nInjected: header", "../../etc/passwd", "k&x=1;y", "%2F%2E%2E", " \t\u3000",
			"ключ-ü-🔑", "\xff\xfe", strings.Repeat("k", ops.MaxKeyBytes), strings.Repeat("\x00", 32<<20),
		} {
			k := ops.Identity{Tenant: "acme", Tool: "charge-card", Key: key}.ProviderKey()
			require.Regexp(t, safe, k, "key %.20q", key)
			require.Len(t, k, 61)
			require.True(t, strings.HasPrefix(k, opsmodel.ProviderKeyPrefix))
		}
	})
}
