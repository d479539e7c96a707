// Package cli holds the commands of commandbus as cobra commands a team adds to its own binary:
// migrate (schema migrations of every registered line), tsq and tsq processes (the troubleshooting
// queue of commands and of executions), dlq (the dead-letter queue), executions (list, show, start,
// signal, retry, cancel, complete, skip, suspend and resume executions of every model), and serve
// and worker (run the workers of a configuration file's enabled domains, serve also the REST API
// and console). The binary registers its models through Config.Register, so the commands can start
// and act on executions of its types, and its handlers, models and console pages through
// Config.Setup, so serve and worker run them; the package itself imports no application code.
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
//		cli.PrepareRoot(root) // usage errors exit 2, --help lists the exit codes, --log-level/--log-format
//		os.Exit(cli.ExitCode(root.ExecuteContext(context.Background())))
//	}
//
// Then `payroll migrate up --database postgres://...`, `payroll tsq processes list`,
// `payroll executions retry ID --reason "bank back"`. Every operational command takes --database
// (or COMMANDBUS_DATABASE_URL) and --schema; actions are audited with --actor and --reason. An
// action given filters instead of an ID (`payroll tsq retry --domain fx --error-code X
// --older-than 1h`) applies to every match, one audited action each, after --dry-run or with
// --yes. Exit codes tell usage errors (2), not found (3), conflicts (4), pending migrations (5)
// and an unmigrated database (6) from other failures (1); see ExitCode.
//
// With a Setup hook (see ExampleConfig_setup) the same binary runs its workers:
// `payroll worker --config payroll.yml`, or `payroll serve --config payroll.yml` with the REST API
// and console. The file is read by package config (database.url, server.tokens, the library's
// keys, every key overridable from the environment); Configure may adjust it before the client is
// created, and StartStack starts the same stack from a binary's own commands.
package cli
