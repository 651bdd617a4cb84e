package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// signed is an audit store and a checkpoint of its chains (acme at seq 6,
// globex at seq 2) signed by the operator, who sees every tenant.
type signed struct {
	*auditStore
	key, cp string
}

func newSigned(t *testing.T) *signed {
	t.Helper()
	s := &signed{auditStore: newAuditStore(t)}
	dir := t.TempDir()
	s.key, s.cp = filepath.Join(dir, "audit.key"), filepath.Join(dir, "cp.json")
	code, _, errOut := run("audit", "keygen", "--out", s.key)
	require.Equal(t, ExitOK, code, errOut)
	code, _, errOut = run("audit", "checkpoint", "--config", s.cfg, "--key", s.key, "--out", s.cp)
	require.Equal(t, ExitOK, code, errOut)
	return s
}

// verify runs audit verify as cfg against the checkpoint, its key pinned.
func (s *signed) verify(cfg string, args ...string) (int, string, string) {
	return run(append([]string{"audit", "verify", "--config", cfg, "--checkpoint", s.cp, "--public-key", s.key + ".pub"}, args...)...)
}

// TestAuditVerifySignedChainNotVisible: a one-tenant viewer verifying a
// checkpoint of every chain fails, naming the chain it cannot see, unless
// it asks for a partial check (found by review: it exited 0, "not
// compared").
func TestAuditVerifySignedChainNotVisible(t *testing.T) {
	t.Parallel()
	s := newSigned(t)
	viewer := dbtest.NewPerson(t, s.d, "viewer", "acme")
	cfg := personConfig(t, viewer, "")
	problem := "the checkpoint signed chains " + viewer.Role + " cannot see (hidden from it, or gone), so they were not checked: globex"

	code, out, errOut := s.verify(cfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Regexp(t, `(?m)^acme\s+6\s+6\s+\S+\s+seq 6 ✓\s+✓ ok$`, out)
	require.Contains(t, out, "  not checked, not visible to "+viewer.Role+" (or gone): globex\n")
	require.Contains(t, out, "✗ "+problem+"\n")
	require.NotContains(t, out, "chains verified")
	require.Equal(t, "opsdesk: "+problem+" (verify as a role that sees every chain the checkpoint signed, "+
		"or add --partial to check only the chains this role sees)\n", errOut)

	var rep auditreport.Report
	code, out, _ = s.verify(cfg, "-o", "json")
	require.Equal(t, ExitFailure, code)
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.OK)
	require.False(t, rep.Partial)
	require.Equal(t, problem, rep.Problem)
	require.Equal(t, []string{"globex"}, rep.Checkpoint.NotChecked)

	// Asked for, a partial check passes and lists what it did not check.
	code, out, errOut = s.verify(cfg, "--partial")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "  not checked, not visible to "+viewer.Role+" (or gone): globex\n")
	require.Contains(t, out, "✓ 6 records in 1 chain verified; partial check; the checkpoint's chains not checked: globex\n")
	code, out, _ = s.verify(cfg, "--partial", "-o", "json")
	require.Equal(t, ExitOK, code)
	rep = auditreport.Report{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.OK)
	require.True(t, rep.Partial)
	require.Empty(t, rep.Problem)
	require.Equal(t, []string{"globex"}, rep.Checkpoint.NotChecked)

	// --tenant leaves the other chains out by itself; the chain it names
	// must be seen.
	code, out, errOut = s.verify(cfg, "--tenant", "acme")
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "  not checked, left out by --tenant: globex\n")
	code, out, errOut = s.verify(cfg, "--tenant", "globex", "--partial")
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Equal(t, "opsdesk: no audit chain globex visible to "+viewer.Role+"\n", errOut)

	// The attacker deletes globex's chain with its head row: to a viewer
	// of every tenant it is gone, to acme's viewer still a failure.
	s.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'globex'`)
	_, err := s.d.Admin.Exec(t.Context(), `DELETE FROM opsdesk.audit_heads WHERE tenant = 'globex'`)
	require.NoError(t, err)
	auditor := dbtest.NewPerson(t, s.d, "viewer", "*")
	code, out, errOut = s.verify(personConfig(t, auditor, ""))
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, out, "first broken record: tenant globex seqs 1 to 2 missing: the chain is gone, but the checkpoint signed seq 2\n")
	code, out, errOut = s.verify(cfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, errOut, problem)
}

// TestAuditVerifyHeadRowTampered: a chain with records and no head row, or
// with its head row at seq 0, fails, named (found by review: both
// verified).
func TestAuditVerifyHeadRowTampered(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	viewer := dbtest.NewPerson(t, s.d, "viewer", "acme", "globex")
	cfg := personConfig(t, viewer, "")
	code, out, errOut := run("audit", "verify", "--config", cfg)
	require.Equal(t, ExitOK, code, out+errOut)

	_, err := s.d.Admin.Exec(t.Context(), `UPDATE opsdesk.audit_heads SET seq = 0, hash = NULL WHERE tenant = 'acme'`)
	require.NoError(t, err)
	code, out, errOut = run("audit", "verify", "--config", cfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Equal(t, "opsdesk: the audit trail does not verify: tenant acme seq 1: the chain goes on to seq 6 past its head row at seq 0: "+
		"the head row was rewritten\n", errOut)

	_, err = s.d.Admin.Exec(t.Context(), `DELETE FROM opsdesk.audit_heads WHERE tenant = 'globex'`)
	require.NoError(t, err)
	code, out, errOut = run("audit", "verify", "--config", cfg, "--tenant", "globex")
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, out, "✗ seq 2: the chain ends at seq 2, but has no head row: the head row was deleted")
	require.Equal(t, "opsdesk: the audit trail does not verify: tenant globex seq 2: the chain ends at seq 2, but has no head row: "+
		"the head row was deleted\n", errOut)
}

// TestAuditNothingIsNoSuccess: a tenant misspelt, or a role that sees no
// chain, is a failure that says so, never an empty success (found by
// review: verify --tenant nosuch printed "✓ 0 records in 0 chains
// verified").
func TestAuditNothingIsNoSuccess(t *testing.T) {
	t.Parallel()
	s := newAuditStore(t)
	role := s.operator.Role

	code, out, errOut := run("audit", "verify", "--config", s.cfg, "--tenant", "nosuch")
	require.Equal(t, ExitFailure, code, out+errOut)
	require.NotContains(t, out, "✓")
	require.Contains(t, out, "✗ no audit chain nosuch visible to "+role+"\n")
	require.Equal(t, "opsdesk: no audit chain nosuch visible to "+role+"\n", errOut)
	code, out, _ = run("audit", "verify", "--config", s.cfg, "--tenant", "nosuch", "-o", "json")
	require.Equal(t, ExitFailure, code)
	var rep auditreport.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.OK)
	require.Equal(t, "no audit chain nosuch visible to "+role, rep.Problem)

	nobody := dbtest.NewPerson(t, s.d, "viewer", "initech")
	nobodyCfg := personConfig(t, nobody, "")
	code, out, errOut = run("audit", "verify", "--config", nobodyCfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Equal(t, "opsdesk: no audit chain visible to "+nobody.Role+"\n", errOut)

	// audit list: a tenant named in the filter must have a chain the role
	// sees; a filter that matches nothing otherwise is still fine.
	for _, filter := range []string{"tenant:nosuch", "tenant:acme,nosuch", "tenant:''"} {
		code, out, errOut = run("audit", "list", filter, "--config", s.cfg)
		require.Equal(t, ExitFailure, code, filter+": "+out+errOut)
		require.Empty(t, out, filter)
		require.Regexp(t, `^opsdesk: no audit chain (nosuch|'') visible to `+role+"\n$", errOut, filter)
	}
	code, out, errOut = run("audit", "list", "tenant:acme", "--config", nobodyCfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Equal(t, "opsdesk: no audit chain acme visible to "+nobody.Role+"\n", errOut)
	code, out, errOut = run("audit", "list", "tenant:acme", "outcome:denied", "--config", s.cfg)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "(no audit records match)")

	// audit export: nothing to export is an error, and leaves no file.
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--tenant", "nosuch", "-o", filepath.Join(dir, "nosuch.jsonl"), "--config", s.cfg},
		{"-o", filepath.Join(dir, "nobody.jsonl"), "--config", nobodyCfg},
		{"--tenant", "acme", "--since-seq", "100", "-o", filepath.Join(dir, "past.jsonl"), "--config", s.cfg},
	} {
		code, out, errOut = run(append([]string{"audit", "export"}, args...)...)
		require.Equal(t, ExitFailure, code, "%v: %s%s", args, out, errOut)
		require.Regexp(t, `^opsdesk: (no audit chain (nosuch )?visible to \S+|the export resumes chain acme after seq 100, but the chain ends at seq 6: .*)\n$`,
			errOut, args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no file is left behind")

	// Resuming a file that holds more than the database: the chain was
	// cut since, and the file is left as it was.
	file := filepath.Join(dir, "audit.jsonl")
	code, _, errOut = run("audit", "export", "-o", file, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	s.tamper(t, `DELETE FROM opsdesk.audit WHERE tenant = 'acme' AND seq > 4`)
	_, err = s.d.Admin.Exec(t.Context(), `UPDATE opsdesk.audit_heads
SET seq = 4, hash = (SELECT hash FROM opsdesk.audit WHERE tenant = 'acme' AND seq = 4) WHERE tenant = 'acme'`)
	require.NoError(t, err)
	code, out, errOut = run("audit", "export", "--resume", file, "--config", s.cfg)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, errOut, "the export resumes chain acme after seq 6, but the chain ends at seq 4: the records after it are gone from the database")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// exportRecordLine is an export's record line, to rewrite as someone who
// edits the file would, hashes and all.
type exportRecordLine struct {
	Kind string `json:"kind"`
	audit.Record
}

// endLine rewrites the last line of l, the end line, to agree with the
// records before it.
func (l exportLines) endLine(t *testing.T) exportLines {
	t.Helper()
	end := audit.ExportEnd{Kind: audit.KindEnd, Chains: []auditreport.Head{}}
	var order []string
	last := map[string]auditreport.Head{}
	for _, line := range l[:len(l)-1] {
		var r exportRecordLine
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		if r.Kind != audit.KindRecord {
			continue
		}
		end.Records++
		if _, ok := last[r.Tenant]; !ok {
			order = append(order, r.Tenant)
		}
		last[r.Tenant] = auditreport.Head{Tenant: r.Tenant, Seq: r.Seq, Hash: r.Hash}
	}
	for _, tenant := range order {
		end.Chains = append(end.Chains, last[tenant])
	}
	data, err := json.Marshal(end)
	require.NoError(t, err)
	out := slicesClone(l)
	out[len(out)-1] = string(data)
	return out
}

// without returns l without the lines for which drop is true.
func (l exportLines) without(drop func(line string) bool) exportLines {
	var out exportLines
	for _, line := range l {
		if !drop(line) {
			out = append(out, line)
		}
	}
	return out
}

func isCheckpoint(line string) bool { return strings.Contains(line, `"kind":"checkpoint"`) }

// TestAuditVerifyExportOutsideCheckpoint: verify --from-export takes a
// checkpoint kept outside the file, and the export must reach every head
// it signed; a pinned key with no checkpoint at all fails (found by
// review: an export without its last record and its checkpoint line, its
// end line fixed, verified with --public-key).
func TestAuditVerifyExportOutsideCheckpoint(t *testing.T) {
	t.Parallel()
	s := newSigned(t)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	code, _, errOut := run("audit", "export", "--checkpoint", s.cp, "-o", file, "--config", s.cfg)
	require.Equal(t, ExitOK, code, errOut)
	lines := readExport(t, file)
	pinned := []string{"--public-key", s.key + ".pub"}
	outside := []string{"--checkpoint", s.cp, "--public-key", s.key + ".pub"}

	code, out, errOut := verifyExport(t, file, outside...)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, ": 1 segment, 1 checkpoint and 1 kept outside it ("+s.cp+"), verified without a database\n")
	require.Contains(t, out, ", line 10 of the export: ✓ signature verified with the pinned key")
	require.Contains(t, out, ", kept outside the export: ✓ signature verified with the pinned key")
	require.NotContains(t, out, "no checkpoint vouches")

	// acme's last record and the checkpoint's line removed, the end line
	// made to agree.
	cut := lines.without(func(l string) bool { return isCheckpoint(l) || l == lines[lines.record(t, "acme", 6)] }).endLine(t)
	path := cut.write(t)
	code, out, errOut = verifyExport(t, path, pinned...)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.NotContains(t, out, "✓ 7 records")
	require.Contains(t, out, "✗ no checkpoint vouches for the tail")
	require.Contains(t, errOut, "opsdesk: the export does not verify: no checkpoint vouches for the tail: ")
	// Without a key it passes, with a warning that says what is missing.
	code, out, errOut = verifyExport(t, path)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "✓ 7 records in 2 chains verified\n! no checkpoint vouches for the tail: records cut from the end of a chain, "+
		"with the end line made to agree, would not show (verify with --checkpoint and --public-key to vouch for it)\n")
	code, out, _ = verifyExport(t, path, "-o", "json")
	require.Equal(t, ExitOK, code)
	var rep audit.ExportReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, audit.NoCheckpoint, rep.Warning)
	// The checkpoint kept outside finds the cut.
	code, out, errOut = verifyExport(t, path, outside...)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, out, "first broken record: tenant acme seq 6 missing: the chain ends at seq 5, but the checkpoint signed seq 6: its tail was removed\n")

	// acme's seq 6 rewritten and rehashed, the checkpoint's line removed:
	// only the signed hash tells.
	rewritten := lines.without(isCheckpoint)
	i := rewritten.record(t, "acme", 6)
	var r exportRecordLine
	require.NoError(t, json.Unmarshal([]byte(rewritten[i]), &r))
	reason := "approved by the CFO"
	r.Reason, r.Hash = &reason, nil
	r.Hash = audit.Hash(r.Record)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	rewritten[i] = string(data)
	path = rewritten.endLine(t).write(t)
	code, out, errOut = verifyExport(t, path)
	require.Equal(t, ExitOK, code, "the file alone cannot tell: "+out+errOut)
	code, out, errOut = verifyExport(t, path, outside...)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Regexp(t, `first broken record: tenant acme seq 6: hash [0-9a-f]{16}… is not the [0-9a-f]{16}… the checkpoint signed`, out)

	// globex left out, the header made to claim an export of acme alone:
	// the header does not narrow a checkpoint kept outside.
	narrowed := lines.without(func(l string) bool {
		return isCheckpoint(l) || strings.Contains(l, `"tenant":"globex"`) && strings.Contains(l, `"kind":"record"`)
	}).endLine(t)
	narrowed[0] = strings.Replace(narrowed[0], `"kind":"export",`, `"kind":"export","tenant":"acme",`, 1)
	path = narrowed.write(t)
	code, out, errOut = verifyExport(t, path, outside...)
	require.Equal(t, ExitFailure, code, out+errOut)
	require.Contains(t, out, "  not checked, left out by --tenant: globex\n")
	require.Equal(t, "opsdesk: the checkpoint signed heads of chains the export does not reach, so they were not checked: globex "+
		"(verify an export that holds every chain the checkpoint signed, or add --partial to check only the chains this one holds)\n", errOut)
	code, out, errOut = verifyExport(t, path, append(outside, "--partial")...)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "✓ 6 records in 1 chain verified; partial check; the checkpoint's chains not checked: globex\n")
	code, out, _ = verifyExport(t, path, append(outside, "--partial", "-o", "json")...)
	require.Equal(t, ExitOK, code)
	rep = audit.ExportReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.OK)
	require.Len(t, rep.Reports, 1)
	require.True(t, rep.Reports[0].Checkpoint.Outside)
	require.True(t, rep.Reports[0].Partial)
	require.Equal(t, []string{"globex"}, rep.Reports[0].Checkpoint.NotChecked)
}
