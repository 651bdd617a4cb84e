package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// auditRows are the TENANT/SEQ columns of audit list's table, in order.
func auditRows(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^AT \(UTC\)\s+TENANT\s+SEQ\s+ROLE\s+ACTION\s+OUTCOME\s+TOOL\s+KEY\s+OP\s+CHANGE\s+FLAGS$`, lines[0])
	var rows []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[2]+"/"+f[3]) // date and time are the first two
	}
	return rows
}

var nextCursor = regexp.MustCompile(`^opsdesk: more records match; next page: --after (a1\.\S+)\n$`)

func TestAuditList(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t) // acme's 6 records, then globex's 2

	code, out, errOut := run("audit", "list", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, []string{"globex/2", "globex/1", "acme/6", "acme/5", "acme/4", "acme/3", "acme/2", "acme/1"}, auditRows(t, out))
	require.Contains(t, out, "decide:defer")

	// Page by page through one tenant's chain.
	code, out, errOut = run("audit", "list", "tenant:acme", "--limit", "4", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, []string{"acme/6", "acme/5", "acme/4", "acme/3"}, auditRows(t, out))
	m := nextCursor.FindStringSubmatch(errOut)
	require.NotNil(t, m, errOut)
	code, out, errOut = run("audit", "list", "tenant:acme", "--limit", "4", "--after", m[1], "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, []string{"acme/2", "acme/1"}, auditRows(t, out))
	require.Empty(t, errOut, "the last page has no next cursor")

	// JSON carries the cursor; filters combine.
	code, out, errOut = run("audit", "list", "tenant:acme", "action:decide:*", "--limit", "3", "-o", "json", "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	var page struct {
		Records []map[string]any `json:"records"`
		Next    string           `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Records, 3)
	require.Equal(t, float64(6), page.Records[0]["seq"])
	require.Equal(t, s.operator.Role, page.Records[0]["role"])
	require.NotEmpty(t, page.Next)

	// A scoped viewer sees its tenant's chain only.
	viewer := dbtest.NewPerson(t, s.d, "viewer", "globex")
	code, out, errOut = run("audit", "list", "--config", personConfig(t, viewer, ""))
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, []string{"globex/2", "globex/1"}, auditRows(t, out))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"colour:red"}, `filter: "colour:red": unknown field "colour"`},
		{[]string{"outcome:ok"}, `unknown outcome "ok" (outcomes: succeeded, denied, failed)`},
		{[]string{"since:yesterday"}, "since needs a time such as 2026-11-30T10:00Z"},
		{[]string{"--after", "page-2"}, `--after: cursor "page-2" is not one that audit list printed`},
		{[]string{"--limit", "0"}, "--limit 0: give a number from 1 to 1000"},
		{[]string{"-o", "yaml"}, `-o "yaml": one of table, json`},
	} {
		code, out, errOut := run(append([]string{"audit", "list", "--config", s.cfg}, tc.args...)...)
		require.Equal(t, ExitUsage, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}

// exportLines reads an export as its lines, and finds a record's line.
type exportLines []string

func readExport(t *testing.T, path string) exportLines {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func (l exportLines) record(t *testing.T, tenant string, seq int64) int {
	t.Helper()
	for i, line := range l {
		var r struct {
			Kind   string `json:"kind"`
			Tenant string `json:"tenant"`
			Seq    int64  `json:"seq"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		if r.Kind == "record" && r.Tenant == tenant && r.Seq == seq {
			return i
		}
	}
	t.Fatalf("no record %s/%d in the export", tenant, seq)
	return -1
}

func (l exportLines) write(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edited.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(l, "\n")+"\n"), 0o600))
	return path
}

// noDB is a config whose database does not exist: verifying an export
// never needs one.
func noDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	content := "contexts:\n  gone:\n    dsn: \"host=" + t.TempDir() + " user=nobody dbname=gone connect_timeout=1\"\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func verifyExport(t *testing.T, path string, extra ...string) (int, string, string) {
	t.Helper()
	return run(append([]string{"audit", "verify", "--from-export", path, "--config", noDB(t)}, extra...)...)
}

func TestAuditExport(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "audit.key")
	code, _, _ := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code)
	cpPath := filepath.Join(dir, "cp.json")
	code, _, errOut := run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--out", cpPath)
	require.Equal(t, ExitOK, code, errOut)
	s.decide(t, "run-42:create-ticket", 2) // acme goes on past the checkpoint's seq 6

	file := filepath.Join(dir, "audit.jsonl")
	code, out, errOut := run("audit", "export", "--checkpoint", cpPath, "-o", file, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "opsdesk: exported 10 records of 2 chains and 1 checkpoint as "+s.operator.Role)
	lines := readExport(t, file)
	require.Len(t, lines, 13) // export, 10 records, checkpoint, end
	require.Contains(t, lines[0], `"kind":"export"`)
	require.Contains(t, lines[11], `"kind":"checkpoint"`)
	require.Contains(t, lines[12], `"kind":"end"`)

	code, out, errOut = verifyExport(t, file, "--public-key", key+".pub")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "export "+file+": 1 segment, 1 checkpoint, verified without a database\n")
	require.Regexp(t, `(?m)^acme\s+8\s+8\s+\S+\s+seq 6 ✓\s+✓ ok$`, out)
	require.Regexp(t, `(?m)^globex\s+2\s+2\s+\S+\s+seq 2 ✓\s+✓ ok$`, out)
	require.Contains(t, out, "signature verified with the pinned key")
	require.Contains(t, out, "✓ 10 records in 2 chains verified")

	t.Run("EditedField", func(t *testing.T) {
		edited := slicesClone(lines)
		i := edited.record(t, "acme", 3)
		require.Contains(t, edited[i], `"reason":"r"`)
		edited[i] = strings.Replace(edited[i], `"reason":"r"`, `"reason":"approved"`, 1)
		code, out, errOut := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "first broken record: tenant acme seq 3: hash does not match its contents\n")
		require.Equal(t, "opsdesk: the audit trail does not verify: tenant acme seq 3: hash does not match its contents\n", errOut)
	})

	t.Run("DeletedLine", func(t *testing.T) {
		edited := slicesClone(lines)
		i := edited.record(t, "acme", 4)
		edited = append(edited[:i], edited[i+1:]...)
		code, out, _ := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "first broken record: tenant acme seq 4 missing: 3 is followed by 5\n")
		require.Contains(t, out, "holds 9 records, but its end line (line 12) says 10")
	})

	t.Run("DuplicatedLine", func(t *testing.T) {
		// Found by review: it read "seqs 5 to 3 missing".
		edited := slicesClone(lines)
		i := edited.record(t, "acme", 4)
		edited = slices.Insert(edited, i+1, edited[i])
		code, out, errOut := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		twice := fmt.Sprintf("tenant acme seq 4 appears twice (lines %d and %d)", i+1, i+2)
		require.Contains(t, out, "first broken record: "+twice+"\n")
		require.Contains(t, out, "holds 11 records, but its end line (line 14) says 10")
		require.Equal(t, "opsdesk: the audit trail does not verify: "+twice+"\n", errOut)
	})

	t.Run("SwappedLines", func(t *testing.T) {
		edited := slicesClone(lines)
		i, j := edited.record(t, "acme", 4), edited.record(t, "acme", 5)
		edited[i], edited[j] = edited[j], edited[i]
		code, out, _ := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, fmt.Sprintf("first broken record: tenant acme seq 4 (line %d) is out of order: seq 5 (line %d) comes before it\n", j+1, i+1))
	})

	t.Run("CutTailWithItsEndLineRewritten", func(t *testing.T) {
		// acme cut back to seq 4 and the end line made to agree: only the
		// checkpoint, which signed seq 6, can tell.
		edited := slicesClone(lines)
		from, to := edited.record(t, "acme", 5), edited.record(t, "acme", 8)
		var end audit.ExportEnd
		require.NoError(t, json.Unmarshal([]byte(edited[len(edited)-1]), &end))
		var four struct {
			Hash []byte `json:"hash"`
		}
		require.NoError(t, json.Unmarshal([]byte(edited[edited.record(t, "acme", 4)]), &four))
		end.Records -= 4
		for i := range end.Chains {
			if end.Chains[i].Tenant == "acme" {
				end.Chains[i].Seq, end.Chains[i].Hash = 4, four.Hash
			}
		}
		data, err := json.Marshal(end)
		require.NoError(t, err)
		edited[len(edited)-1] = string(data)
		edited = append(edited[:from], edited[to+1:]...)
		path := edited.write(t)
		code, out, _ := verifyExport(t, path)
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "first broken record: tenant acme seqs 5 to 6 missing: the chain ends at seq 4, "+
			"but the checkpoint signed seq 6: its tail was removed\n")

		// Without the checkpoint's line the same file verifies: what a
		// checkpoint is for.
		cp := slicesClone(readExport(t, path))
		for i, l := range cp {
			if strings.Contains(l, `"kind":"checkpoint"`) {
				cp = append(cp[:i], cp[i+1:]...)
				break
			}
		}
		code, out, errOut := verifyExport(t, cp.write(t))
		require.Equal(t, ExitOK, code, out+errOut)
	})

	t.Run("CutTailWithItsCountRewritten", func(t *testing.T) {
		// globex's last record gone, the checkpoint's line too, the end
		// line's count made to agree: its heads still name seq 2.
		edited := slicesClone(lines[:11])
		edited = append(edited[:edited.record(t, "globex", 2)], edited[edited.record(t, "globex", 2)+1:]...)
		edited = append(edited, strings.Replace(lines[12], `"records":10`, `"records":9`, 1))
		code, out, _ := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "first broken record: tenant globex seq 2 missing: the export's end line says the chain ends at seq 2: lines were removed\n")
	})

	t.Run("CutHeadWithItsCountRewritten", func(t *testing.T) {
		// acme's first three records gone and the end line's count made to
		// agree: the header says the segment holds acme from its start, so
		// the chain must begin at seq 1 (found by review: an export used to
		// take any first record as an anchor).
		edited := slicesClone(lines)
		from, to := edited.record(t, "acme", 1), edited.record(t, "acme", 3)
		edited = append(edited[:from], edited[to+1:]...)
		last := len(edited) - 1
		edited[last] = strings.Replace(edited[last], `"records":10`, `"records":7`, 1)
		code, out, _ := verifyExport(t, edited.write(t), "--public-key", key+".pub")
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "first broken record: tenant acme seqs 1 to 3 missing")
	})

	t.Run("CutShort", func(t *testing.T) {
		edited := slicesClone(lines[:9])
		code, out, errOut := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, out, "✗ the segment of line 1 has no end line: the file was cut short\n")
		require.Contains(t, errOut, "opsdesk: the export does not verify: the segment of line 1 has no end line")
	})

	t.Run("AlteredCheckpoint", func(t *testing.T) {
		edited := slicesClone(lines)
		edited[11] = strings.Replace(edited[11], `"seq":6`, `"seq":5`, 1)
		code, out, errOut := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, errOut, "the checkpoint's signature does not verify: the file was altered after signing")

		other := filepath.Join(t.TempDir(), "other.key")
		code, _, _ = run("audit", "keygen", "--out", other)
		require.Equal(t, ExitOK, code)
		code, out, errOut = verifyExport(t, file, "--public-key", other+".pub")
		require.Equal(t, ExitFailure, code, out)
		require.Contains(t, errOut, "the checkpoint does not verify: the checkpoint was signed with key")
	})

	t.Run("Malformed", func(t *testing.T) {
		edited := slicesClone(lines)
		edited[3] = `{"kind":"record","tenant":"acme","colour":"red"}`
		code, _, errOut := verifyExport(t, edited.write(t))
		require.Equal(t, ExitFailure, code)
		require.Contains(t, errOut, `export line 4 (record): json: unknown field "colour"`)
	})
}

func slicesClone(l exportLines) exportLines { return append(exportLines{}, l...) }

func TestAuditExportResumes(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "audit.key")
	code, _, _ := run("audit", "keygen", "--out", key)
	require.Equal(t, ExitOK, code)
	file := filepath.Join(dir, "audit.jsonl")
	code, _, errOut := run("audit", "export", "-o", file, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)

	// More records, a checkpoint of the new heads; the export resumed.
	s.decide(t, "mail-1", 3)
	s.decide(t, "run-42:create-ticket", 1)
	cpPath := filepath.Join(dir, "cp.json")
	code, _, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", key, "--out", cpPath)
	require.Equal(t, ExitOK, code, errOut)
	code, _, errOut = run("audit", "export", "--resume", file, "--checkpoint", cpPath, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "exported 4 records of 2 chains and 1 checkpoint")
	// Nothing new: an empty segment, still whole.
	code, _, errOut = run("audit", "export", "--resume", file, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "exported 0 records of 0 chains")

	code, out, errOut := verifyExport(t, file, "--public-key", key+".pub")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, ": 3 segments, 1 checkpoint")
	require.Regexp(t, `(?m)^acme\s+7\s+7\s+\S+\s+seq 7 ✓\s+✓ ok$`, out)
	require.Regexp(t, `(?m)^globex\s+5\s+5\s+\S+\s+seq 5 ✓\s+✓ ok$`, out)
	require.Contains(t, out, "✓ 12 records in 2 chains verified")

	// The links across segments are checked: a resumed segment whose first
	// record does not follow the last one before it breaks.
	lines := readExport(t, file)
	i := lines.record(t, "globex", 3)
	edited := slicesClone(lines)
	edited[i] = regexp.MustCompile(`"prev_hash":"[^"]*"`).ReplaceAllString(edited[i], `"prev_hash":"AAAA"`)
	code, out, _ = verifyExport(t, edited.write(t))
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "first broken record: tenant globex seq 3: hash does not match its contents")

	t.Run("SinceSeqConcatenated", func(t *testing.T) {
		// A tail of one chain from --since-seq verifies anchored, and
		// says so; appended to the full export it verifies linked.
		tail := filepath.Join(t.TempDir(), "tail.jsonl")
		code, _, errOut := run("audit", "export", "--tenant", "acme", "--since-seq", "4", "--checkpoint", cpPath, "-o", tail, "--config", s.cfg)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, errOut, "exported 3 records of 1 chain")
		code, out, errOut := verifyExport(t, tail)
		require.Equal(t, ExitOK, code, out+errOut)
		require.Regexp(t, `(?m)^acme\s+3\s+7\s+\S+\s+seq 7 ✓\s+✓ ok from seq 5 \(anchored by its prev_hash\)$`, out)
		require.Contains(t, out, "not checked, left out by --tenant: globex\n")
		require.Contains(t, out, "✓ 3 records in 1 chain verified; the checkpoint's chains not checked: globex\n")

		head := filepath.Join(t.TempDir(), "head.jsonl")
		code, _, errOut = run("audit", "export", "--tenant", "acme", "-o", head, "--config", s.cfg)
		require.Equal(t, ExitOK, code, errOut)
		headLines := readExport(t, head)
		cut := headLines.record(t, "acme", 5)
		// The head up to seq 4 with its end line made to agree, then the tail.
		var end audit.ExportEnd
		require.NoError(t, json.Unmarshal([]byte(headLines[len(headLines)-1]), &end))
		var four struct {
			Hash []byte `json:"hash"`
		}
		require.NoError(t, json.Unmarshal([]byte(headLines[cut-1]), &four))
		end.Records, end.Chains = 4, []auditreport.Head{{Tenant: "acme", Seq: 4, Hash: four.Hash}}
		data, err := json.Marshal(end)
		require.NoError(t, err)
		joined := append(append(slicesClone(headLines[:cut]), string(data)), readExport(t, tail)...)
		code, out, errOut = verifyExport(t, joined.write(t))
		require.Equal(t, ExitOK, code, out+errOut)
		require.Regexp(t, `(?m)^acme\s+7\s+7\s+\S+\s+seq 7 ✓\s+✓ ok$`, out)
	})
}

// TestAuditExportOutlivesItsDatabase exports a database, drops it, and
// verifies the file.
func TestAuditExportOutlivesItsDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, drop, err := dbtest.Create(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, d.AdminDSN)
	require.NoError(t, err)
	for i := range 5 {
		for _, tenant := range []string{"acme", ""} {
			// audit_append queues the entry as for people; the export seals it.
			_, err := conn.Exec(ctx, `SELECT opsdesk.audit_append(ROW($1::text, NULL, NULL, NULL, NULL, NULL, 'test:event', 'succeeded',
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, $2::text, NULL, NULL, false, false, '{"n": 1}', NULL, NULL, NULL, NULL)::opsdesk.audit)`,
				tenant, "event "+strconv.Itoa(i))
			require.NoError(t, err)
		}
	}
	require.NoError(t, conn.Close(ctx))
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("contexts:\n  test:\n    dsn: "+strconv.Quote(d.AdminDSN)+"\n"), 0o600))
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	code, _, errOut := run("audit", "export", "-o", file, "--config", cfg)
	require.Equal(t, ExitOK, code, errOut)

	require.NoError(t, drop())
	_, err = pgx.Connect(context.WithoutCancel(ctx), d.AdminDSN)
	require.Error(t, err, "the database is gone")

	code, out, errOut := run("audit", "verify", "--from-export", file, "--config", cfg)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Regexp(t, `(?m)^''\s+5\s+5\s+`, out)
	require.Regexp(t, `(?m)^acme\s+5\s+5\s+`, out)
	require.Contains(t, out, "✓ 10 records in 2 chains verified")
}

func TestAuditExportUsageErrors(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "exists.jsonl")
	require.NoError(t, os.WriteFile(existing, []byte("{}\n"), 0o600))
	notExport := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notExport, []byte("hello\n"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "export", "--since-seq", "5"}, "--since-seq counts one chain's records: give --tenant too"},
		{[]string{"audit", "export", "--tenant", "acme", "--since-seq", "-1"}, "--since-seq -1: give a seq of 0 or more"},
		{[]string{"audit", "export", "-o", existing}, "an export is never overwritten"},
		{[]string{"audit", "export", "-o", filepath.Join(dir, "new.jsonl"), "--resume", existing}, "-o and --resume both name the file"},
		{[]string{"audit", "export", "--resume", filepath.Join(dir, "missing.jsonl")}, "--resume: open"},
		{[]string{"audit", "export", "--resume", notExport}, "is not a JSON object"},
		{[]string{"audit", "export", "--resume", existing, "--tenant", "acme", "--since-seq", "2"}, "leave out --since-seq"},
		{[]string{"audit", "export", "--checkpoint", existing}, "--checkpoint: " + existing + " is not an opsdesk audit checkpoint"},
		{[]string{"audit", "export", "extra"}, "accepts 0 arg"},
		{[]string{"audit", "verify", "--from-export", existing, "--checkpoint", existing}, "--checkpoint: " + existing + " is not an opsdesk audit checkpoint"},
		{[]string{"audit", "verify", "--from-export", existing, "--tenant", "acme"}, "export one chain with audit export --tenant"},
		{[]string{"audit", "verify", "--from-export", filepath.Join(dir, "missing.jsonl")}, "--from-export: open"},
		{[]string{"audit", "verify", "--from-export", existing, "--public-key", notExport}, "--public-key: "},
	} {
		code, out, errOut := run(append(tc.args, "--config", s.cfg)...)
		require.Equal(t, ExitUsage, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	// Not an export at all: a failure naming the problem.
	code, _, errOut := verifyExport(t, existing)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, `export line 1: unknown kind ""`)
	data, err := os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "{}\n", string(data), "an existing file is left alone")
}
