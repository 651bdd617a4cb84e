package readmodel

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseAuditFilter(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ok := map[string]AuditFilter{
		"": {},
		"tenant:acme tool:create-ticket key:run-42* id:48213 role:alice action:decide:* outcome:denied": {
			Tenants: []string{"acme"}, Tools: []string{"create-ticket"}, Keys: []string{"run-42*"},
			OperationIDs: []int64{48213}, Roles: []string{"alice"}, Actions: []string{"decide:*"}, Outcomes: []string{"denied"},
		},
		"tenant:'',acme":                      {Tenants: []string{"", "acme"}},
		"since:2026-11-30T10:00Z":             {Since: since},
		"since:2026-11-30T11:00:00+01:00":     {Since: since},
		"until:2026-11-30T10:00":              {Until: since},
		"until:2026-12-01":                    {Until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		"since:2026-11-30T10:00:00.123456Z":   {Since: since.Add(123456 * time.Microsecond)},
		"age<1h age>10m":                      {MinAge: 10 * time.Minute, MaxAge: time.Hour},
		"AGE<2d":                              {MaxAge: 48 * time.Hour},
		`role:"a b" outcome:succeeded,failed`: {Roles: []string{"a b"}, Outcomes: []string{"succeeded", "failed"}},
		// Pasted in capitals, held as uuid's text prints it.
		"batch:0B7E6C1A-3F2D-4C5E-9A8B-1C2D3E4F5A6B": {Batches: []string{"0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"}},
		"batch:0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b,00000000-0000-0000-0000-000000000000 tenant:acme": {
			Tenants: []string{"acme"}, Batches: []string{"0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b", "00000000-0000-0000-0000-000000000000"},
		},
	}
	for in, want := range ok {
		got, err := ParseAuditFilter(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		again, err := ParseAuditFilter(got.String())
		require.NoError(t, err, got.String())
		require.Equal(t, got, again, got.String())
	}

	bad := map[string]string{
		"alice":                             "write field:value (fields: tenant, tool, key, id, role, action, outcome, since, until, batch), or age>10m / age<1h",
		"state:stuck":                       `unknown field "state"`,
		"outcome:ok":                        `unknown outcome "ok" (outcomes: succeeded, denied, failed)`,
		"role:":                             "role needs a value",
		"role:a,,b":                         "empty alternative",
		"role:a role:b":                     "given twice; list alternatives as role:a,b",
		"since:yesterday":                   "since needs a time such as 2026-11-30T10:00Z",
		"until:2026-13-01":                  "until needs a time",
		"since>2026-11-30":                  "write field:value",
		"age>soon":                          "positive duration",
		"age:1h":                            "write field:value",
		"expires<1h":                        `unknown field "expires"`,
		"id:x":                              "id needs an operation's record number",
		"id:-3":                             "id needs an operation's record number",
		"age>1h age<5m":                     "match nothing",
		"since:2026-12-01 until:2026-11-30": "match nothing (since is inclusive, until exclusive)",
		`role:"a`:                           "unterminated quote",
		"role:" + strings.Repeat("a", MaxFilterBytes): "the filter is 8197 bytes: write at most 8192",
	}
	for in, want := range bad {
		_, err := ParseAuditFilter(in)
		require.ErrorContains(t, err, want, in)
	}
}

// TestParseAuditFilterBatchHostile: a batch value that is not a UUID is
// refused by the parser, before any SQL, whatever it carries.
func TestParseAuditFilterBatchHostile(t *testing.T) {
	t.Parallel()
	const good = "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"
	const want = "batch needs a bulk run's id, a UUID"
	for name, in := range map[string]string{
		"Short":       "batch:0b7e6c1a",
		"NoDashes":    "batch:0b7e6c1a3f2d4c5e9a8b1c2d3e4f5a6b0000",
		"Braces":      "batch:{" + good[1:35] + "}",
		"NotHex":      "batch:0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6g",
		"NUL":         "batch:" + good[:35] + "\x00",
		"Control":     "batch:" + good[:35] + "\x1b",
		"Ampersand":   "batch:" + good[:35] + "&",
		"SQL":         "batch:'||pg_sleep(9)||'-0000-0000-0000-0000000",
		"Appended":    "batch:" + good + "&tenant=x",
		"Unicode":     "batch:" + good[:35] + "ａ",
		"EmptyInList": "batch:" + good + ",",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAuditFilter(in)
			require.Error(t, err)
			switch name {
			case "EmptyInList":
				require.ErrorContains(t, err, "empty alternative")
			case "NUL", "Control": // refused whole, before any field is read
				require.ErrorContains(t, err, "the filter contains a control character")
			default:
				require.ErrorContains(t, err, want)
			}
		})
	}
	t.Run("ThirtyTwoMiB", func(t *testing.T) {
		_, err := ParseAuditFilter("batch:" + strings.Repeat("a", 32<<20))
		require.ErrorContains(t, err, "write at most 8192")
	})
}

func TestAuditCursor(t *testing.T) {
	t.Parallel()
	c := AuditCursor{At: time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC), Tenant: "a.b c", Seq: 42}
	got, err := ParseAuditCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, got)
	for _, bad := range []string{"", "a1.", "a1.!!", "x" + c.String(), "a1." + "MTIz"} {
		_, err := ParseAuditCursor(bad)
		require.ErrorContains(t, err, "is not one that audit list printed", bad)
	}
}

// A batches cursor reads back what it wrote, and anything else is refused
// with words that say where cursors come from.
func TestBatchCursor(t *testing.T) {
	t.Parallel()
	c := BatchCursor{StartedAt: time.Date(2026, 12, 2, 13, 0, 0, 123456000, time.UTC), ID: "0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b"}
	got, err := ParseBatchCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, got)
	for _, bad := range []string{"", "b1.", "a1." + c.String()[3:], "b1.!!!", c.String() + "x",
		"b1." + base64.RawURLEncoding.EncodeToString([]byte("12.not-a-uuid")),
		"b1." + base64.RawURLEncoding.EncodeToString([]byte("x.0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b")),
		"b1." + base64.RawURLEncoding.EncodeToString([]byte("12.0b7e6c1a-3f2d-4c5e-9a8b-1c2d3e4f5a6b'; DROP")),
		"b1." + strings.Repeat("A", 1<<20), "b1.\x00\x1b[2J"} {
		_, err := ParseBatchCursor(bad)
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), "not one that audit batches printed")
		require.Less(t, len(err.Error()), 200)
	}
}
