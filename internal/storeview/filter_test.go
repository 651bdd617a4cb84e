package storeview

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

func FuzzParseFilter(f *testing.F) {
	for _, seed := range []string{
		"state:stuck tool:create-ticket tenant:acme key:run-42* owner:worker-3 age>10m",
		`key:"a b" id:1,2 age<1h`, "state:conflicted", "x", `"`, "age>1h age<2h", "key:%_\\*",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := readmodel.ParseFilter(in)
		if err != nil {
			return
		}
		again, err := readmodel.ParseFilter(got.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", got.String(), in, err)
		}
		require.Equal(t, got, again)
		// Whatever was typed, the SQL text is the same as for placeholder
		// values of the same shape: every value is bound as a parameter.
		require.Equal(t, conds(got), conds(shapeOf(got)), in)
	})
}

func TestLikePatternEscapes(t *testing.T) {
	t.Parallel()
	require.Equal(t, `run-42%`, likePattern("run-42*"))
	require.Equal(t, `50\%\_off%`, likePattern("50%_off*"))
	require.Equal(t, `a\\b`, likePattern(`a\b`))
}

func conds(f readmodel.Filter) []string {
	b := &builder{}
	b.apply(f, "$0")
	return b.conds
}

// shapeOf replaces every value with "x", keeping what shapes the SQL:
// which fields are set and whether a key is a pattern.
func shapeOf(f readmodel.Filter) readmodel.Filter {
	blank := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = "x"
			if strings.Contains(v, "*") {
				out[i] = "x*"
			}
		}
		return out
	}
	f.Tenants, f.Tools, f.Owners, f.Keys = blank(f.Tenants), blank(f.Tools), blank(f.Owners), blank(f.Keys)
	ids := make([]int64, len(f.IDs))
	for i := range ids {
		ids[i] = 1
	}
	f.IDs = ids
	if f.MinAge > 0 {
		f.MinAge = time.Second
	}
	if f.MaxAge > 0 {
		f.MaxAge = time.Second
	}
	if f.ExpiresWithin > 0 {
		f.ExpiresWithin = time.Second
	}
	if f.ExpiresAfter > 0 {
		f.ExpiresAfter = time.Second
	}
	return f
}
