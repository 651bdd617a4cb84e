package pgtime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/pgtime"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Every timestamptz PostgreSQL holds reads into a time.Time on a pool of
// db.PoolConfig, which every opsdesk pool is, and JSON writes it.
func TestEveryTimestamptzReads(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	finite := time.Date(2026, time.May, 13, 10, 30, 0, 123456000, time.UTC)
	for _, c := range []struct {
		text string    // as PostgreSQL writes it, in UTC
		read time.Time // as it reads
		back string    // what the read time is as a parameter
	}{
		{"infinity", pgtime.Infinity, "infinity"},
		{"-infinity", pgtime.NegativeInfinity, "-infinity"},
		{"294276-12-31 23:59:59.999999+00", pgtime.Infinity, "infinity"},
		{"10000-01-01 00:00:00+00", pgtime.Infinity, "infinity"},
		{"9999-12-31 23:59:59.999999+00", time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC), ""},
		{"4714-11-24 00:00:00+00 BC", pgtime.NegativeInfinity, "-infinity"},
		{"0001-01-01 00:00:00+00", pgtime.NegativeInfinity, "-infinity"}, // Go's zero time would read as NULL
		{"0001-01-01 00:00:00.000001+00", time.Date(1, time.January, 1, 0, 0, 0, 1000, time.UTC), ""},
		{"2026-05-13 10:30:00.123456+00", finite, ""},
	} {
		var got time.Time
		var ptr *time.Time
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT $1::timestamptz, $1::timestamptz`, c.text).Scan(&got, &ptr), c.text)
		require.True(t, c.read.Equal(got), "%s read as %v, want %v", c.text, got, c.read)
		require.True(t, c.read.Equal(*ptr), c.text)
		_, err := json.Marshal(got)
		require.NoError(t, err, c.text)
		if c.back == "" {
			c.back = c.text
		}
		// What was read goes back as it came, a list's cursor say, or
		// infinite.
		var same bool
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT $1::timestamptz = $2::timestamptz`, got, c.back).Scan(&same), c.text)
		require.True(t, same, "%s went back as %v, not %s", c.text, got, c.back)
	}
	// NULL stays NULL where it may be, and an error where it may not.
	var ptr *time.Time
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT NULL::timestamptz`).Scan(&ptr))
	require.Nil(t, ptr)
	var got time.Time
	require.ErrorContains(t, d.Admin.QueryRow(t.Context(), `SELECT NULL::timestamptz`).Scan(&got), "cannot scan NULL")
	// Other types are pgx's, and pgtype.Timestamptz keeps its modifier.
	var day time.Time
	var raw pgtype.Timestamptz
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT $1::date, 'infinity'::timestamptz`, finite).Scan(&day, &raw))
	require.Equal(t, "2026-05-13", day.Format(time.DateOnly))
	require.Equal(t, pgtype.Infinity, raw.InfinityModifier)
}

func TestToTimestamptzAndExact(t *testing.T) {
	t.Parallel()
	require.Equal(t, pgtype.Infinity, pgtime.ToTimestamptz(pgtime.Infinity).InfinityModifier)
	require.Equal(t, pgtype.NegativeInfinity, pgtime.ToTimestamptz(pgtime.NegativeInfinity).InfinityModifier)
	for _, v := range []time.Time{time.Now(), pgtime.Infinity.Add(time.Hour), time.Date(294276, 12, 31, 0, 0, 0, 0, time.UTC),
		pgtime.NegativeInfinity.Add(-time.Hour)} {
		require.Equal(t, pgtype.Timestamptz{Time: v, Valid: true}, pgtime.ToTimestamptz(v), "%v", v)
		require.Equal(t, v, pgtime.Exact(pgtype.Timestamptz{Time: v, Valid: true}))
	}
	require.Equal(t, time.Time{}, pgtime.FromTimestamptz(pgtype.Timestamptz{}))
	require.Equal(t, time.Time{}, pgtime.Exact(pgtype.Timestamptz{}))
	require.Equal(t, pgtime.Infinity, pgtime.Exact(pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.Infinity}))
	require.Equal(t, pgtime.NegativeInfinity, pgtime.Exact(pgtype.Timestamptz{Valid: true, Time: time.Time{}}),
		"the zero time means none")
}
