// Package cli holds the operational commands of commandbus as cobra commands a team adds to its own
// binary: migrate (schema migrations of every registered line), tsq and tsq processes (the
// troubleshooting queue of commands and of executions), dlq (the dead-letter queue) and executions
// (list, show, start, signal, retry, cancel, complete, skip, suspend and resume executions of every
// model). The binary registers its models through Config.Register, so the commands can start and
// act on executions of its types; the package itself imports no application code.
//
// A team's main:
//
//	func main() {
//		root := &cobra.Command{Use: "payroll", SilenceUsage: true}
//		root.AddCommand(cli.Commands(cli.Config{
//			Register: func(client *commandbus.Client) (*orchestration.Runtime, error) {
//				rt, err := orchestration.New(client, orchestration.Config{})
//				if err == nil {
//					_, err = process.NewManager(rt, process.Process[PayrollRun](payrollProcess{}))
//				}
//				return rt, err
//			},
//		})...)
//		if err := root.ExecuteContext(context.Background()); err != nil {
//			os.Exit(1)
//		}
//	}
//
// Then `payroll migrate up --database postgres://...`, `payroll tsq processes list`,
// `payroll executions retry ID --reason "bank back"`. Every command takes --database (or
// COMMANDBUS_DATABASE_URL) and --schema; actions are audited with --actor and --reason.
package cli
