package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

type versionOptions struct {
	DSN    string
	Output string
}

// versionJSON is version -o json; DatabaseSchema is null without --dsn.
type versionJSON struct {
	Version        string `json:"version"`
	Schema         int64  `json:"schema"`
	Go             string `json:"go"`
	DatabaseSchema *int64 `json:"database_schema"`
}

func newVersionCmd() *cobra.Command {
	var opts versionOptions
	cmd := &cobra.Command{
		Use:   "version [--dsn DSN]",
		Short: "Print opsdesk's version and the schema version it needs",
		Long: "Print opsdesk's version and the schema version it needs. With --dsn, also read the\n" +
			"database's schema version, and fail when it is older or newer than this opsdesk's\n" +
			"(connect as the migrating role or one granted opsdesk_viewer).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			return runVersion(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.DSN, "dsn", "", "PostgreSQL connection string (URL or key=value) of a database to compare")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

func runVersion(ctx context.Context, opts versionOptions, w io.Writer) error {
	if opts.DSN != "" && strings.TrimSpace(opts.DSN) == "" {
		return usagef("--dsn is blank: give the database to compare, or leave the flag out")
	}
	v := versionJSON{Version: buildVersion(), Schema: int64(opsmigrate.LatestVersion()), Go: runtime.Version()}
	if opts.Output != "json" {
		if _, err := fmt.Fprintf(w, "opsdesk %s (schema %d, %s)\n", v.Version, v.Schema, v.Go); err != nil {
			return err
		}
	}
	if opts.DSN == "" {
		if opts.Output == "json" {
			return writeJSON(w, v)
		}
		return nil
	}
	pool, err := openDSN(ctx, opts.DSN, "opsdesk version")
	if err != nil {
		return err
	}
	defer pool.Close()
	checked, err := opsmigrate.Check(ctx, pool)
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		db := int64(checked.Database)
		v.DatabaseSchema = &db
		return writeJSON(w, v)
	}
	_, err = fmt.Fprintf(w, "database schema %d\n", checked.Database)
	return err
}

// buildVersion is the module version, or the VCS revision of a source build.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel-" + rev
}
