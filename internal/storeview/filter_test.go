package storeview

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFilter(t *testing.T) {
	t.Parallel()
	ok := map[string]Filter{
		"": {},
		"state:stuck tool:create-ticket tenant:acme key:run-42* owner:worker-3 age>10m": {
			States: []State{StateStuck}, Tools: []string{"create-ticket"}, Tenants: []string{"acme"},
			Keys: []string{"run-42*"}, Owners: []string{"worker-3"}, MinAge: 10 * time.Minute,
		},
		"state:pending,stuck":          {States: []State{StatePending, StateStuck}},
		"state:conflicted":             {Conflicted: true},
		"state:rejected,conflicted":    {States: []State{StateRejected}, Conflicted: true},
		"  id:48213,7   ":              {IDs: []int64{48213, 7}},
		`key:"run 42"`:                 {Keys: []string{"run 42"}},
		"age<1h age>5m":                {MinAge: 5 * time.Minute, MaxAge: time.Hour},
		"STATE:stuck":                  {States: []State{StateStuck}},
		"tool:a,b tenant:x":            {Tools: []string{"a", "b"}, Tenants: []string{"x"}},
		"key:50%_off*":                 {Keys: []string{"50%_off*"}},
		"owner:host/123 key:a:b:c":     {Owners: []string{"host/123"}, Keys: []string{"a:b:c"}},
		"tenant:acme\ttool:send-email": {Tenants: []string{"acme"}, Tools: []string{"send-email"}},
		"expires<24h":                  {ExpiresWithin: 24 * time.Hour},
		"expires>2d expires<7d":        {ExpiresAfter: 48 * time.Hour, ExpiresWithin: 7 * 24 * time.Hour},
	}
	for in, want := range ok {
		got, err := ParseFilter(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		// The canonical form parses back to the same filter.
		again, err := ParseFilter(got.String())
		require.NoError(t, err, got.String())
		require.Equal(t, got, again, got.String())
	}

	bad := map[string]string{
		"stuck":                 "write field:value",
		"state:stuk":            `unknown state "stuk"`,
		"colour:red":            `unknown field "colour"`,
		"tool:":                 "tool needs a value",
		"tool:a,,b":             "empty alternative",
		"tool:a tool:b":         "given twice; list alternatives as tool:a,b",
		"age>soon":              "positive duration",
		"age>-5m":               "positive duration",
		"age:5m":                "write field:value",
		"tenant>acme":           "write field:value",
		"id:abc":                "record number",
		"id:0":                  "record number",
		`key:"run 42`:           "unterminated quote",
		"age>1h age<5m":         "match nothing",
		"key:\x01":              "control character",
		"tenant:\xff":           "UTF-8",
		":stuck":                "write field:value",
		"state:completed state": "write field:value",
		"expires:24h":           "write field:value",
		"expires<soon":          "positive duration",
		"expires>7d expires<1d": "match nothing",
		"tenant:" + strings.Repeat("a", MaxFilterBytes): "the filter is 8199 bytes: write at most 8192",
		"tenant:" + strings.Repeat("a", 32<<20):         "the filter is 33554439 bytes: write at most 8192",
	}
	for in, want := range bad {
		_, err := ParseFilter(in)
		require.ErrorContains(t, err, want, in)
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, seed := range []string{
		"state:stuck tool:create-ticket tenant:acme key:run-42* owner:worker-3 age>10m",
		`key:"a b" id:1,2 age<1h`, "state:conflicted", "x", `"`, "age>1h age<2h", "key:%_\\*",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseFilter(in)
		if err != nil {
			return
		}
		again, err := ParseFilter(got.String())
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

func conds(f Filter) []string {
	b := &builder{}
	b.apply(f, "$0")
	return b.conds
}

// shapeOf replaces every value with "x", keeping what shapes the SQL:
// which fields are set and whether a key is a pattern.
func shapeOf(f Filter) Filter {
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
