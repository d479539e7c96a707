package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/tenant"
)

// newTenantsCommand is `tenants`: tenants, their tiers and limits.
func newTenantsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenants",
		Short: "List, create, show and update tenants (tier, own limit, status)",
		Long: "tenants manages the tenants whose capacity-limited executions run at most their limit at\n" +
			"once: their tier's (FREE 1, PRO 5, ENTERPRISE 20 by default) or their own. Changes are\n" +
			"audited; a raised limit or a reactivation admits queued executions at once.",
	}
	cmd.AddCommand(newTenantsListCommand(), newTenantsCreateCommand(), newTenantsShowCommand(), newTenantsUpdateCommand())
	return cmd
}

// openTenants opens the database and its tenant service.
func openTenants(cmd *cobra.Command, db *DatabaseFlags) (*tenant.Service, func(), error) {
	database, err := OpenDatabase(cmd.Context(), db.URL, db.Schema, 2)
	if err != nil {
		return nil, nil, err
	}
	return tenant.NewWithExecutor(database.Driver.Executor(), nil), database.Close, nil
}

func tenantLine(t *tenant.Tenant) string {
	limit := fmt.Sprint(t.MaxActive)
	if t.MaxActiveOverride != nil {
		limit += " (own)"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d/%s\t%d\t%s", t.ID, t.Tier, t.Status, t.Active, limit, t.Queued, formatTimePtr(t.OldestQueuedAt))
}

const tenantHeader = "ID\tTIER\tSTATUS\tACTIVE/LIMIT\tQUEUED\tOLDEST QUEUED"

func newTenantsListCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	var list listFlags
	var status string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tenants with their limit, active executions and queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := list.check(); err != nil {
				return err
			}
			s, closeDB, err := openTenants(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			rows, err := readPagesAfter(cmd, &list, func(t *tenant.Tenant) string { return t.ID },
				func(after string, limit int) ([]*tenant.Tenant, error) {
					return s.List(cmd.Context(), tenant.ListRequest{Status: tenant.Status(status), AfterID: after, Limit: limit})
				})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "no tenant", tenantHeader, tenantLine)
		},
	}
	db.Register(cmd, "")
	list.register(cmd, 100)
	cmd.Flags().StringVar(&status, "status", "", "only tenants in this status (active, suspended, deleted)")
	output.register(cmd)
	return cmd
}

func newTenantsShowCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, closeDB, err := openTenants(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			t, err := s.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), t)
			}
			return writeList(cmd.OutOrStdout(), &output, []*tenant.Tenant{t}, "", tenantHeader, tenantLine)
		},
	}
	db.Register(cmd, "")
	output.register(cmd)
	return cmd
}

func newTenantsCreateCommand() *cobra.Command {
	var db DatabaseFlags
	var req tenant.CreateRequest
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "create ID --tier TIER",
		Short: "Create a tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.ID, req.Status = args[0], tenant.Status(status)
			if cmd.Flags().Changed("limit") {
				req.MaxActiveOverride = &limit
			}
			s, closeDB, err := openTenants(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			t, err := s.Create(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created tenant %s: tier %s, %d at once, %s\n", t.ID, t.Tier, t.MaxActive, t.Status)
			return nil
		},
	}
	db.Register(cmd, "")
	f := cmd.Flags()
	f.StringVar(&req.Tier, "tier", "", "FREE, PRO, ENTERPRISE or another tier with a limit")
	f.StringVar(&req.Name, "name", "", "a display name")
	f.StringVar(&status, "status", "", "active (default), suspended or deleted")
	f.IntVar(&limit, "limit", 0, "the tenant's own limit of executions at once, instead of its tier's")
	f.StringVar(&req.Actor, "actor", defaultActor(), "who creates it (audited)")
	return cmd
}

func newTenantsUpdateCommand() *cobra.Command {
	var db DatabaseFlags
	var req tenant.UpdateRequest
	var tier, status, name string
	var limit int
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a tenant's tier, own limit (--limit, --clear-limit) or status (audited)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if f.Changed("tier") {
				req.Tier = &tier
			}
			if f.Changed("status") {
				s := tenant.Status(strings.ToLower(status))
				req.Status = &s
			}
			if f.Changed("name") {
				req.Name = &name
			}
			if f.Changed("limit") {
				req.MaxActiveOverride = &limit
			}
			s, closeDB, err := openTenants(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			t, admission, err := s.Update(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: tier %s, %d at once, %s; %d admitted, %d failed\n",
				t.ID, t.Tier, t.MaxActive, t.Status, admission.Admitted, admission.Failed)
			return nil
		},
	}
	db.Register(cmd, "")
	f := cmd.Flags()
	f.StringVar(&tier, "tier", "", "the new tier")
	f.StringVar(&status, "status", "", "active, suspended or deleted")
	f.StringVar(&name, "name", "", "a display name")
	f.IntVar(&limit, "limit", 0, "the tenant's own limit of executions at once")
	f.BoolVar(&req.ClearOverride, "clear-limit", false, "remove the tenant's own limit (its tier's applies)")
	f.StringVar(&req.Actor, "actor", defaultActor(), "who changes it (audited)")
	f.StringVar(&req.Reason, "reason", "", "why (audited)")
	return cmd
}
