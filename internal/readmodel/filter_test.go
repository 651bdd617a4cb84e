package readmodel

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

	// Written back as an operator would write it (the expiring tile opens
	// expires<24h, not expires<24h0m0s), and parsed back the same.
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 10 * time.Minute: "10m",
		10 * time.Second: "10s", 90 * time.Second: "1m30s", 168 * time.Hour: "168h", 1500 * time.Millisecond: "1.5s"} {
		f := Filter{ExpiresWithin: d}
		require.Equal(t, "expires<"+want, f.String())
		again, err := ParseFilter(f.String())
		require.NoError(t, err)
		require.Equal(t, f, again)
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
