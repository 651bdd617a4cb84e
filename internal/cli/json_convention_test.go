package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestJSONConvention(t *testing.T) {
	t.Parallel()
	type inner struct {
		At time.Time `json:"at"`
	}
	type embedded struct {
		Kept time.Duration `json:"kept"`
	}
	type value struct {
		embedded
		Set       time.Time         `json:"set"`
		Unset     time.Time         `json:"unset"`
		UnsetPtr  *time.Time        `json:"unset_ptr"`
		List      []inner           `json:"list"`
		Strings   []string          `json:"strings"`
		Retention time.Duration     `json:"retention"`
		Already   time.Duration     `json:"lease_seconds"`
		Omitted   string            `json:"omitted,omitempty"`
		Hidden    string            `json:"-"`
		Raw       json.RawMessage   `json:"raw"`
		Map       map[string]inner  `json:"map"`
		Key       string            `json:"key"`
		ByName    map[string]string `json:"by_name"`
		unexp     int
	}
	set := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, value{
		embedded: embedded{Kept: 90 * time.Minute},
		Set:      set, Retention: 7 * 24 * time.Hour, Already: 1500 * time.Millisecond,
		Hidden: "x", Raw: json.RawMessage(`{"b":1,"a":[]}`), Map: map[string]inner{"m": {}},
		// Stored text that looks like an unset time stays text.
		Key: "0001-01-01T00:00:00Z", unexp: 1,
	}))
	require.JSONEq(t, `{
		"kept_seconds": 5400,
		"set": "2026-12-02T06:00:00Z",
		"unset": null,
		"unset_ptr": null,
		"list": [],
		"strings": [],
		"retention_seconds": 604800,
		"lease_seconds": 1.5,
		"raw": {"b":1,"a":[]},
		"map": {"m": {"at": null}},
		"key": "0001-01-01T00:00:00Z",
		"by_name": {}
	}`, buf.String())
	// Fields keep their declared order.
	require.Less(t, bytes.Index(buf.Bytes(), []byte(`"kept_seconds"`)), bytes.Index(buf.Bytes(), []byte(`"set"`)))
	require.Less(t, bytes.Index(buf.Bytes(), []byte(`"unset"`)), bytes.Index(buf.Bytes(), []byte(`"list"`)))
	// A nil value is null; a nil top-level list is [].
	buf.Reset()
	require.NoError(t, writeJSON(&buf, []listItem(nil)))
	require.Equal(t, "[]\n", buf.String())
}

func TestVersionJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := run("version", "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.NotEmpty(t, v["version"])
	require.Nil(t, v["database_schema"])
	code, _, _ = run("version", "-o", "yaml")
	require.Equal(t, ExitUsage, code)

	d := dbtest.New(t)
	viewer := dbtest.NewPerson(t, d, "viewer")
	code, out, errOut = run("version", "--dsn", viewer.DSN, "-o", "json")
	require.Equal(t, ExitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.Equal(t, v["schema"], v["database_schema"])
}

func TestDoctorJSON(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	viewer := dbtest.NewPerson(t, d, "viewer")
	code, text, _ := run("doctor", "--dsn", viewer.DSN)
	code2, out, errOut := run("doctor", "--dsn", viewer.DSN, "-o", "json")
	require.Equal(t, code, code2, errOut)
	var r doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Equal(t, code == ExitOK, r.OK)
	require.NotEmpty(t, r.Checks)
	for _, c := range r.Checks {
		require.Contains(t, doctorMarks, c.Status, c.Check)
		require.NotNil(t, c.More, "an empty list is [], never null")
		// Each finding is the table's line.
		require.Contains(t, text, doctorMarks[c.Status]+" ", c.Check)
		// Not compared: the timed checks, and the privileged logins,
		// which are the cluster's and change between the two runs as
		// other tests on the shared cluster create roles.
		if c.Check != "reachable" && c.Check != "clock" && c.Check != "privileged" {
			require.Contains(t, text, c.Detail, c.Check)
		}
	}
	require.Contains(t, out, `"check": "reachable"`)

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		code, out, _ := run("doctor", "--dsn", "host="+t.TempDir()+" user=x dbname=y connect_timeout=1", "-o", "json")
		require.Equal(t, ExitFailure, code)
		var r doctorReport
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		require.False(t, r.OK)
		require.Equal(t, "failed", r.Checks[0].Status)
	})
}
