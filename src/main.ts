// The one entry point: the `storefront` command line, whose `serve` starts the server.
import { Command } from "commander";
import { registerBackupCommands } from "./cli/backup.commands.ts";
import { addJsonOptions, reportCliError } from "./cli/context.ts";
import { registerConsoleCommands } from "./cli/console.commands.ts";
import { registerDeliveryCommands } from "./cli/deliveries.commands.ts";
import { registerInvoiceCommands } from "./cli/invoices.commands.ts";
import { registerEventCommands } from "./cli/events.commands.ts";
import { registerLocalTestingCommands } from "./cli/local-testing.commands.ts";
import { registerPluginCommands } from "./cli/plugins.commands.ts";
import { registerPluginTestCommand } from "./cli/plugins-test.command.ts";
import { registerSecretsCommands } from "./cli/secrets.commands.ts";
import { registerSeedCommand } from "./cli/seed.command.ts";
import { registerServeCommand } from "./cli/serve.command.ts";
import { registerStoreCommands } from "./cli/stores.commands.ts";
import { versionLine } from "./platform/ops/release.ts";

export function buildProgram(): Command {
  const program = new Command()
    .name("storefront")
    .description("Self-hostable commerce back end: read API, Lua payment plugins, sandbox.")
    .version(versionLine(), "-V, --version", "print the release and the schema version")
    // Mistakes in the arguments: commander's one line, with where to look on the same line.
    .configureOutput({ outputError: (text, write) => write(`${text.trimEnd()} (see --help)\n`) })
    // Options after a command name belong to that command (`plugins rollback --version 2` is not --version).
    .enablePositionalOptions();

  registerServeCommand(program);
  registerStoreCommands(program);
  registerSeedCommand(program);
  registerPluginCommands(program);
  registerPluginTestCommand(program); // adds `plugins test` to the command above
  registerDeliveryCommands(program); // adds `deliveries list|tail` to the command above
  registerInvoiceCommands(program);
  registerSecretsCommands(program);
  registerBackupCommands(program);
  registerEventCommands(program);
  registerLocalTestingCommands(program); // adds `endpoints test` and `plugins trigger`
  registerConsoleCommands(program);
  // Every command that prints a result takes --json; `serve` prints logs, which are JSON lines already.
  addJsonOptions(program, ["serve"]);
  return program;
}

/** Runs one command line; expected failures end the process with one line and a non-zero code. */
export async function runCli(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv).catch(reportCliError);
}

if (import.meta.main) void runCli(process.argv);
