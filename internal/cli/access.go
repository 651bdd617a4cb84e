package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

func newAccessCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access",
		Short: "Grant people access to the operation store (admins who see every tenant)",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return usagef("access needs a command: grant or revoke (see opsdesk access --help)")
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	var opts grantOptions
	grant := &cobra.Command{
		Use:   "grant ROLE --as viewer|operator|admin|reconciler (--tenant T | --all-tenants) --reason TEXT",
		Short: "Make a login role a viewer, operator, admin or reconciler of a tenant, or of every tenant",
		Long: "Make a login role (create it first: CREATE ROLE alice LOGIN ...) a viewer, operator,\n" +
			"admin or reconciler (a machine's login for opsdesk reconciler: it reads as a viewer and\n" +
			"decides only what the reconciler's allowlist lets a lookup settle), replacing the level it\n" +
			"had, and let it see --tenant as well as the tenants it saw\n" +
			"(repeat the command for more tenants). Every tenant takes an explicit --all-tenants; a\n" +
			"grant never narrows what a role sees: revoke it, then grant what it should see. The\n" +
			"command says what is in force afterwards. Audited.",
		Example: "  opsdesk access grant alice --as operator --tenant acme --reason 'joins the acme on-call rota'\n" +
			"  opsdesk access grant bob --as admin --all-tenants --reason 'runs the opsdesk rota'\n" +
			"  opsdesk access grant recon --as reconciler --all-tenants --reason 'auto-reconciles charge-card'",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				return runGrant(ctx, w, args[0], opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	grant.Flags().StringVar(&opts.Level, "as", "", "viewer|operator|admin|reconciler (required)")
	grant.Flags().StringVar(&opts.Tenant, "tenant", "", "the tenant it may see (this or --all-tenants is required)")
	grant.Flags().BoolVar(&opts.AllTenants, "all-tenants", false, "let it see every tenant")
	grant.Flags().StringVar(&opts.Reason, "reason", "", "why: kept in the audit trail (required)")
	var revokeReason string
	revoke := &cobra.Command{
		Use:   "revoke ROLE --reason TEXT",
		Short: "Take every level and tenant away from a login role",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReason(revokeReason, "it goes into the audit trail"); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				res, err := desk.GrantAccess(ctx, w.pool, args[0], "", "", revokeReason, w.cfg.Context.DisplayName)
				return writeDecision(cmd.OutOrStdout(), "table", fmt.Sprintf("%s has no access", args[0]), res, err)
			})
		},
	}
	revoke.Flags().StringVar(&revokeReason, "reason", "", "why: kept in the audit trail (required)")
	cmd.AddCommand(grant, revoke)
	return cmd
}

// grantOptions are access grant's flags.
type grantOptions struct {
	Level      string
	Tenant     string
	AllTenants bool
	Reason     string
}

// check refuses a grant that does not say exactly what it opens: a grant
// never widens to every tenant by default. Nothing is granted or audited.
func (o grantOptions) check() error {
	switch {
	case o.Level != "viewer" && o.Level != "operator" && o.Level != "admin" && o.Level != "reconciler":
		return usagef("--as %q: one of viewer, operator, admin, reconciler", o.Level)
	case o.AllTenants && o.Tenant != "":
		return usagef("--tenant %s and --all-tenants: give one, the tenant or every tenant", o.Tenant)
	case o.Tenant == reconcile.EveryTenant:
		return usagef("--tenant '*' is every tenant: say --all-tenants; nothing was granted")
	case !o.AllTenants && strings.TrimSpace(o.Tenant) == "":
		return usagef("--tenant T is required: the tenant the role may see (repeat the command for more), " +
			"or --all-tenants for every tenant; nothing was granted")
	}
	return checkReason(o.Reason, "it goes into the audit trail")
}

// tenant is the tenant the grant names.
func (o grantOptions) tenant() string {
	if o.AllTenants {
		return reconcile.EveryTenant
	}
	return o.Tenant
}

// runGrant grants and says what is in force afterwards, read back from
// the store: a grant adds a tenant and replaces the level, so the role
// may see more than the tenant it names. A grant that leaves the tenants
// the role sees as they were says so, and how to narrow them.
func runGrant(ctx context.Context, w *writer, role string, opts grantOptions, out, errOut io.Writer) error {
	tenant := opts.tenant()
	before, beforeErr := desk.RoleAccess(ctx, w.pool, role)
	res, err := desk.GrantAccess(ctx, w.pool, role, opts.Level, tenant, opts.Reason, w.cfg.Context.DisplayName)
	if err != nil {
		return writeDecision(out, "table", fmt.Sprintf("grant of %s to %s as %s", tenantWords(tenant), role, opts.Level), res, err)
	}
	after, err := desk.RoleAccess(ctx, w.pool, role)
	if err != nil {
		// The grant committed: say so, and that the rest is unknown.
		fmt.Fprintln(errOut, "warning: granted, but what else the role sees could not be read:", termtext.CleanLines(err.Error()))
		return writeDecision(out, "table", fmt.Sprintf("%s is %s of %s, and of any tenant it saw before", role, opts.Level, tenantWords(tenant)), res, nil)
	}
	werr := writeDecision(out, "table", describeAccess(after), res, nil)
	if beforeErr == nil {
		if note := grantNote(before, after, tenant); note != "" {
			fmt.Fprintln(errOut, "warning:", termtext.Clean(note))
		}
	}
	return werr
}

// describeAccess says what a role may do and where.
func describeAccess(a reconcile.Access) string { return a.Role + " is " + accessWords(a) }

// accessWords is a role's level and tenants as people say them.
func accessWords(a reconcile.Access) string {
	tenants := strings.Join(a.Tenants, ", ")
	switch {
	case a.Every():
		tenants = "every tenant"
	case len(a.Tenants) == 0:
		tenants = "no tenant"
	}
	if a.Level == "" {
		return "of no level, mapped to " + tenants
	}
	return a.Level + " of " + tenants
}

// grantNote says what a grant of tenant did not change, or "".
func grantNote(before, after reconcile.Access, tenant string) string {
	role := after.Role
	narrow := fmt.Sprintf("to narrow it, revoke %s first (opsdesk access revoke %s --reason …), then grant %s", role, role, tenant)
	switch {
	case tenant != reconcile.EveryTenant && before.Every() && before.Level == after.Level:
		return fmt.Sprintf("%s already sees every tenant as %s: the grant of %s changes nothing; %s", role, after.Level, tenant, narrow)
	case tenant != reconcile.EveryTenant && before.Every():
		return fmt.Sprintf("%s already sees every tenant: the grant of %s made it %s of every tenant, not of %s alone; %s",
			role, tenant, after.Level, tenant, narrow)
	case before.Equal(after):
		return fmt.Sprintf("%s was already %s: the grant of %s changes nothing", role, accessWords(before), tenantWords(tenant))
	}
	return ""
}

// tenantWords is a grant's tenant as people say it.
func tenantWords(tenant string) string {
	if tenant == reconcile.EveryTenant {
		return "every tenant"
	}
	return tenant
}
