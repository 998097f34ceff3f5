// The one entry point: the `storefront` command line, whose `serve` starts the server.
import { Command } from "commander";
import { reportCliError } from "./cli/context.ts";
import { registerEventCommands } from "./cli/events.commands.ts";
import { registerPluginCommands } from "./cli/plugins.commands.ts";
import { registerPluginTestCommand } from "./cli/plugins-test.command.ts";
import { registerSeedCommand } from "./cli/seed.command.ts";
import { registerServeCommand } from "./cli/serve.command.ts";
import { registerStoreCommands } from "./cli/stores.commands.ts";

const program = new Command()
  .name("storefront")
  .description("Self-hostable commerce back end: read API, Lua payment plugins, sandbox.")
  .showHelpAfterError();

registerServeCommand(program);
registerStoreCommands(program);
registerSeedCommand(program);
registerPluginCommands(program);
registerPluginTestCommand(program); // adds `plugins test` to the command above
registerEventCommands(program);

program.parseAsync(process.argv).catch(reportCliError);
