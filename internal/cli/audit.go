package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/termtext"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/audit"
)

func newAuditCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Browse, export and verify the audit trail, and sign checkpoints of it to keep outside the database",
		Long: "Every decision, reveal and access change appends a record to its tenant's hash chain in the\n" +
			"database. audit verify recomputes every chain in opsdesk itself, so a record edited, removed or\n" +
			"reordered in the database is found. A chain's tail can be cut or rewritten without a trace in\n" +
			"the chain: a signed checkpoint of the heads, kept outside the database, finds that too.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("audit needs a command: list, export, verify, seal, checkpoint or keygen (see opsdesk audit --help)")
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	cmd.AddCommand(newAuditListCmd(g), newAuditBatchesCmd(g), newAuditExportCmd(g), newAuditVerifyCmd(g), newAuditSealCmd(g), newAuditCheckpointCmd(g), newAuditKeygenCmd())
	return cmd
}

type auditVerifyOptions struct {
	Tenant     *string // nil: every chain the role may see
	Checkpoint string
	PublicKey  string
	Output     string
	FromExport string
	// Partial accepts a check of fewer chains than the checkpoint signed.
	Partial bool
}

func newAuditVerifyCmd(g *globalFlags) *cobra.Command {
	var opts auditVerifyOptions
	var tenant string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the audit chains the connected role may see; exit 1 at the first broken record",
		Long: "Recompute every audit chain the connected role may see: each seq from 1 without gaps, each hash\n" +
			"from its record's contents, each prev_hash from the record before. With --checkpoint, the\n" +
			"checkpoint's signature must verify and every chain must still hold the head it signed.\n" +
			"A chain the checkpoint signed that the role cannot see fails too (whoever rewrites a chain can\n" +
			"also narrow what a role sees): --partial checks only what the role sees and lists the rest;\n" +
			"--tenant T leaves out the checkpoint's other chains. Checking no chain at all is a failure.\n" +
			"It reads the context's dsn (the primary), not read_dsn: a replica may lag behind a checkpoint.\n\n" +
			"With --from-export it reads no database: it verifies a file from audit export the same way,\n" +
			"every checkpoint in it too, and that each of its segments is whole. --checkpoint adds one kept\n" +
			"outside the file: the export must reach every head it signed (or --partial). With --public-key\n" +
			"an export that no checkpoint vouches for fails: its tail could have been cut.",
		Example: "  opsdesk audit verify\n" +
			"  opsdesk audit verify --tenant acme --checkpoint cp-2026-05-01.json --public-key audit.key.pub -o json\n" +
			"  opsdesk audit verify --from-export audit.jsonl --checkpoint cp-2026-05-01.json --public-key audit.key.pub",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("tenant") {
				opts.Tenant = &tenant
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if opts.FromExport != "" {
				if opts.Tenant != nil {
					return usagef("--from-export verifies every chain the export holds: export one chain with audit export --tenant instead")
				}
				return runAuditVerifyExport(opts, cmd.OutOrStdout())
			}
			if opts.Partial && opts.Checkpoint == "" {
				return usagef("--partial accepts a checkpoint's chains left unchecked: give --checkpoint too")
			}
			cp, pinned, err := opts.anchor()
			if err != nil {
				return err
			}
			return withAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
				return runAuditVerify(ctx, pool, opts, cp, pinned, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "only this tenant's chain ('' is the chain of events outside any tenant)")
	f.StringVar(&opts.Checkpoint, "checkpoint", "", "a checkpoint file from audit checkpoint: the chains must still hold its heads")
	f.StringVar(&opts.PublicKey, "public-key", "", "the key the checkpoint must be signed with (default: the key it carries)")
	f.StringVar(&opts.FromExport, "from-export", "", "verify this file from audit export instead of the database")
	f.BoolVar(&opts.Partial, "partial", false, "check only the chains the role sees (or the export holds) and list the checkpoint's others as not checked")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

// anchor reads the checkpoint and the pinned key; their problems are the
// caller's to fix.
func (o auditVerifyOptions) anchor() (*audit.Checkpoint, ed25519.PublicKey, error) {
	if o.PublicKey != "" && o.Checkpoint == "" {
		return nil, nil, usagef("--public-key pins the key of a checkpoint: give --checkpoint too")
	}
	if o.Checkpoint == "" {
		return nil, nil, nil
	}
	cp, err := audit.ReadCheckpoint(o.Checkpoint)
	if err != nil {
		return nil, nil, usagef("--checkpoint: %w", err)
	}
	if o.PublicKey == "" {
		return cp, nil, nil
	}
	pub, err := audit.ReadPublicKey(o.PublicKey)
	if err != nil {
		return nil, nil, usagef("--public-key: %w", err)
	}
	return cp, pub, nil
}

// withAuditPool loads the configuration, connects to the context's DSN
// and runs fn. Verification reads whole chains in one statement, so the
// console's statement timeout does not apply; interrupting stops it.
func withAuditPool(cmd *cobra.Command, g *globalFlags, fn func(context.Context, *pgxpool.Pool) error) error {
	return withUnsealedAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
		// What has committed is sealed first, so that the trail listed,
		// exported, verified or signed is the freshest there is. A seal
		// that fails leaves entries queued: verify counts them, and the
		// command's own read reports a store it cannot read.
		_, _ = audit.Seal(ctx, pool, "", 0)
		return fn(ctx, pool)
	})
}

// withUnsealedAuditPool is withAuditPool without the seal (audit seal's
// own, which reports what it sealed).
func withUnsealedAuditPool(cmd *cobra.Command, g *globalFlags, fn func(context.Context, *pgxpool.Pool) error) error {
	cfg, err := loadConfig(cmd, g)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	pool, err := openAuditPool(ctx, cfg.Context)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(ctx, pool)
}

func openAuditPool(ctx context.Context, c config.Context) (*pgxpool.Pool, error) {
	poolCfg, err := writePoolConfig(c)
	if err != nil {
		return nil, err
	}
	// One snapshot of every chain: as long as the read takes.
	poolCfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	return openChecked(ctx, poolCfg)
}

func runAuditVerify(ctx context.Context, pool audit.TxBeginner, opts auditVerifyOptions, cp *audit.Checkpoint,
	pinned ed25519.PublicKey, w io.Writer) error {
	rep, err := audit.Verify(ctx, pool, audit.VerifyOpts{Tenant: opts.Tenant, Checkpoint: cp, PublicKey: pinned, Partial: opts.Partial})
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	} else if err := writeAuditReport(w, rep); err != nil {
		return err
	}
	return auditFailure(rep)
}

// auditFailure is the error of a report that does not verify, naming the
// first broken record; nil when it verifies.
func auditFailure(rep *auditreport.Report) error {
	switch {
	case rep.Break != nil:
		return fmt.Errorf("the audit trail does not verify: %s", breakText(rep.Break))
	case rep.Checkpoint != nil && rep.Checkpoint.Problem != "":
		return fmt.Errorf("the checkpoint does not verify: %s", rep.Checkpoint.Problem)
	case rep.Problem != "":
		return errors.New(shown(rep.Problem, fieldBytes, auditMore) + problemHint(rep))
	}
	return nil
}

// problemHint says how to act on a report's Problem: unchecked chains
// are fixed by another role or asked for as a partial check.
func problemHint(rep *auditreport.Report) string {
	cp := rep.Checkpoint
	switch {
	case cp == nil || rep.Partial || len(cp.NotChecked) == 0 || len(rep.Chains) == 0:
		return ""
	case cp.Line > 0 || cp.Outside:
		return " (verify an export that holds every chain the checkpoint signed, or add --partial to check only the chains this one holds)"
	}
	return " (verify as a role that sees every chain the checkpoint signed, or add --partial to check only the chains this role sees)"
}

// auditMore says how to see a value of an audit report whole: a tenant,
// a role or a problem comes from the database or from an export, which
// anyone may have written.
const auditMore = "audit verify -o json prints it whole."

// breakText is a chain's first broken record for people, its tenant cut
// so that the reason stays in view (Break.Error, cut and cleaned).
func breakText(b *auditreport.Break) string {
	return "tenant " + shown(audited.TenantName(b.Tenant), cellBytes, auditMore) + " " + shown(b.Reason, fieldBytes, auditMore)
}

func writeAuditReport(w io.Writer, rep *auditreport.Report) error {
	fmt.Fprintf(w, "audit trail as %s (%s), database time %s\n", shown(rep.Role, cellBytes, auditMore), auditScope(rep),
		rep.At.UTC().Format("2006-01-02 15:04:05 MST"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tRECORDS\tHEAD\tHEAD HASH\tCHECKPOINT\tSTATUS")
	var records int64
	for _, c := range rep.Chains {
		records += c.Records
		checkpoint := "-"
		if s := c.Checkpoint; s != nil {
			mark := "✗"
			if s.Confirmed {
				mark = "✓"
			}
			checkpoint = fmt.Sprintf("seq %d %s", s.Seq, mark)
		}
		status := "✓ ok"
		if c.From > 1 {
			status += fmt.Sprintf(" from seq %d (anchored by its prev_hash)", c.From)
		}
		if c.Break != nil {
			status = "✗ " + shown(c.Break.Reason, fieldBytes, auditMore)
		}
		hash := c.HeadHash.String()
		if len(hash) > 16 {
			hash = hash[:16] + "…"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", shown(audited.TenantName(c.Tenant), cellBytes, auditMore), c.Records, c.HeadSeq, dash(hash), checkpoint, status)
	}
	if len(rep.Chains) == 0 {
		fmt.Fprintf(tw, "(no audit records visible to %s)\n", shown(rep.Role, cellBytes, auditMore))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cp := rep.Checkpoint; cp != nil {
		// The fingerprint and the problem come from the checkpoint file.
		key := "the pinned key " + shown(cp.KeyFingerprint, cellBytes, auditMore)
		if !cp.KeyPinned {
			key = "the checkpoint's own key " + shown(cp.KeyFingerprint, cellBytes, auditMore) +
				" (this proves the file intact, not who signed it: pin the expected key with --public-key)"
		}
		signature := "✓ signature verified with " + key
		if cp.Problem != "" {
			signature = "✗ " + shown(cp.Problem, fieldBytes, auditMore) + "; its heads were not compared"
		}
		where := ""
		switch {
		case cp.Outside:
			where = ", kept outside the export"
		case cp.Line > 0:
			where = fmt.Sprintf(", line %d of the export", cp.Line)
		}
		fmt.Fprintf(w, "checkpoint of %s%s: %s\n", cp.At.UTC().Format(time.RFC3339), where, signature)
		if len(cp.NotVisible) > 0 {
			fmt.Fprintf(w, "  not checked, not visible to %s (or gone): %s\n", shown(rep.Role, cellBytes, auditMore), tenantList(cp.NotVisible))
		}
		if len(cp.NotSelected) > 0 {
			fmt.Fprintf(w, "  not checked, left out by --tenant: %s\n", tenantList(cp.NotSelected))
		}
		if len(cp.BeforeExport) > 0 {
			fmt.Fprintf(w, "  not checked, the export starts after the signed head: %s\n", tenantList(cp.BeforeExport))
		}
	}
	if q := rep.Queued; q != nil && q.Entries > 0 {
		fmt.Fprintf(w, "%s not sealed yet (not verified), the oldest queued %s ago: opsdesk audit seal puts them in their chains\n",
			entries(q.Entries), q.Oldest.Round(time.Second))
	}
	if rep.Break != nil {
		fmt.Fprintf(w, "first broken record: %s\n", breakText(rep.Break))
	}
	if rep.Problem != "" {
		fmt.Fprintf(w, "✗ %s\n", shown(rep.Problem, fieldBytes, auditMore))
	}
	if rep.Break != nil || rep.Problem != "" {
		return nil
	}
	if rep.OK {
		done := fmt.Sprintf("✓ %s in %s verified", counted(records, "record"), counted(len(rep.Chains), "chain"))
		if cp := rep.Checkpoint; cp != nil && len(cp.NotChecked) > 0 {
			if rep.Partial {
				done += "; partial check"
			}
			done += "; the checkpoint's chains not checked: " + tenantList(cp.NotChecked)
		}
		_, err := fmt.Fprintln(w, done)
		return err
	}
	return nil
}

func auditScope(rep *auditreport.Report) string {
	switch {
	case rep.SeesEveryTenant:
		return "every tenant"
	case len(rep.Tenants) > 0:
		return "tenants " + tenantList(rep.Tenants)
	}
	return "no tenants mapped to it"
}

func tenantList(tenants []string) string {
	names := make([]string, len(tenants))
	for i, t := range tenants {
		names[i] = shown(audited.TenantName(t), cellBytes, auditMore)
	}
	return strings.Join(names, ", ")
}

type auditCheckpointOptions struct {
	Key    string
	Tenant *string
	Out    string
}

func newAuditSealCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "seal",
		Short: "Seal committed audit entries into their chains",
		Long: "A decision, a reveal, a grant or a purge queues its audit entry in its own transaction; sealing\n" +
			"gives committed entries their place (seq) and hash in their tenant's chain, in commit order.\n" +
			"opsdesk's commands seal right after they commit, and the console and the exporter seal as they\n" +
			"poll, so this is rarely needed by hand. A chain another session is sealing is left to it: the\n" +
			"answer says how many entries still wait and which session (role and pid) holds their chain.",
		Example: "  opsdesk audit seal\n  opsdesk audit seal -o json",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return usagef("-o %q: the output is text (the default) or json", output)
			}
			return withUnsealedAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
				s, err := audit.Seal(ctx, pool, "", 0)
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), s)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "sealed %s\n", entries(int64(s.Sealed)))
				if s.HeldBy != "" {
					fmt.Fprintf(w, "%s still queued: their chains are being sealed by %s\n", entries(s.Waiting), termtext.Clean(s.HeldBy))
				}
				if s.Problem != "" {
					return errors.New(termtext.Clean(s.Problem))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text or json")
	return cmd
}

// entries counts audit entries: "1 entry", "3 entries".
func entries(n int64) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

func newAuditCheckpointCmd(g *globalFlags) *cobra.Command {
	var opts auditCheckpointOptions
	var tenant string
	cmd := &cobra.Command{
		Use:   "checkpoint --key FILE [--out FILE]",
		Short: "Verify the audit chains, then sign their heads into a checkpoint to keep outside the database",
		Long: "Verify every audit chain the connected role may see (or --tenant's), then sign each chain's head\n" +
			"(tenant, seq, hash) and the database time with an ed25519 key from audit keygen. Keep the\n" +
			"file where the database's administrators cannot change it: audit verify --checkpoint then finds a\n" +
			"tail removed or rewritten since. A trail that does not verify is not signed.",
		Example: "  opsdesk audit checkpoint --key ~/.config/opsdesk/audit.key --out cp-$(date +%F).json",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("tenant") {
				opts.Tenant = &tenant
			}
			if opts.Key == "" {
				return usagef("--key is required: the private key file from opsdesk audit keygen")
			}
			key, err := audit.ReadPrivateKey(opts.Key)
			if err != nil {
				return usagef("--key: %w", err)
			}
			if opts.Out != "" {
				if _, err := os.Lstat(opts.Out); err == nil {
					return usagef("--out %s exists: a checkpoint is never overwritten (choose another file)", opts.Out)
				}
			}
			notes := cmd.ErrOrStderr()
			if info, err := os.Stat(opts.Key); err == nil && runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
				fmt.Fprintf(notes, "opsdesk: %s is readable by others (mode %04o): chmod 600 it\n", opts.Key, info.Mode().Perm())
			}
			return withAuditPool(cmd, g, func(ctx context.Context, pool *pgxpool.Pool) error {
				return runAuditCheckpoint(ctx, pool, opts, key, cmd.OutOrStdout(), notes)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Key, "key", "", "the ed25519 private key file to sign with (required)")
	f.StringVar(&tenant, "tenant", "", "only this tenant's chain")
	f.StringVar(&opts.Out, "out", "", "write the checkpoint to this new file (default: standard output)")
	return cmd
}

func runAuditCheckpoint(ctx context.Context, pool audit.TxBeginner, opts auditCheckpointOptions, key ed25519.PrivateKey,
	w, notes io.Writer) error {
	rep, err := audit.Verify(ctx, pool, audit.VerifyOpts{Tenant: opts.Tenant})
	if err != nil {
		return err
	}
	if len(rep.Chains) == 0 {
		return fmt.Errorf("nothing to sign: %s", shown(rep.Problem, fieldBytes, ""))
	}
	if !rep.OK {
		return fmt.Errorf("not signed: %w", auditFailure(rep))
	}
	heads := rep.Heads()
	cp, err := audit.Sign(rep.At, heads, key)
	if err != nil {
		return err
	}
	var records int64
	for _, h := range heads {
		records += h.Seq
	}
	summary := fmt.Sprintf("signed the heads of %s (%s) at %s with key %s", counted(len(heads), "chain"), counted(records, "record"),
		cp.At.Format(time.RFC3339), shown(cp.KeyFingerprint, cellBytes, auditMore))
	if opts.Out == "" {
		data, err := audit.MarshalCheckpoint(cp)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		// The checkpoint is stdout's; the note goes where a redirect won't take it.
		_, err = fmt.Fprintln(notes, "opsdesk: "+summary)
		return err
	}
	if err := audit.WriteCheckpoint(opts.Out, cp); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s to %s\n", summary, termtext.Clean(opts.Out))
	return err
}

func newAuditKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Create an ed25519 key for signing audit checkpoints",
		Long: "Write a new ed25519 private key to FILE (PEM, PKCS #8, mode 0600) and its public key to FILE.pub,\n" +
			"and print the key's fingerprint. It never overwrites a file. Keep the private key off the\n" +
			"database's hosts; give FILE.pub to whoever verifies (audit verify --public-key).",
		Example: "  opsdesk audit keygen --out ~/.config/opsdesk/audit.key",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out is required: the file to write the private key to")
			}
			return runAuditKeygen(out, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the new private key file (its public key goes to FILE.pub)")
	return cmd
}

func runAuditKeygen(out string, w io.Writer) error {
	// The README's --out ~/.config/opsdesk/audit.key works on a fresh
	// machine: the directory is made, readable by its owner only. An
	// existing one keeps its mode.
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return fmt.Errorf("create the key's directory: %w", err)
	}
	pub, err := audit.GenerateKey(out)
	if errors.Is(err, fs.ErrExist) {
		return usagef("%w: keygen never overwrites a key (choose another --out)", err)
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "private key\t%s (mode 0600: keep it off the database's hosts)\n", out)
	fmt.Fprintf(tw, "public key\t%s.pub (for audit verify --public-key)\n", out)
	fmt.Fprintf(tw, "fingerprint\t%s\n", audit.Fingerprint(pub))
	return tw.Flush()
}
