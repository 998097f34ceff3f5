// `storefront plugins …`, then the rest of the merchant's loop on the local database (`simulate`,
// `deliveries show|replay|prune`, `customers create`, `checkout`), through the same services and in the
// same shapes as the admin API.
import type { Command } from "commander";
import { listCatalog } from "../plugins/catalog.ts";
import { collect, positiveInt, secretsOf } from "./arguments.ts";
import { registerCheckoutCommand, registerCustomerCommands } from "./checkout.commands.ts";
import { CliError, emit, emitList, type JsonOption, printJson, readInput, withServices } from "./context.ts";
import { registerDeliveryRecordCommands } from "./deliveries.commands.ts";
import { registerSimulateCommand } from "./simulate.command.ts";

type StoreOption = JsonOption & { store: string };

/** The merchant's loop, in the order `--help` lists it. */
export function registerPluginCommands(program: Command): void {
  const plugins = program.command("plugins").description("install and manage a store's payment plugins");
  registerPluginSetupCommands(plugins);
  registerPluginInspectionCommands(plugins);
  registerPluginLifecycleCommands(plugins);
  registerSimulateCommand(program);
  registerDeliveryRecordCommands(program);
  registerCustomerCommands(program);
  registerCheckoutCommand(program);
}

/** `plugins catalog|install|secrets`: what can be installed, installing it, its settings. */
function registerPluginSetupCommands(plugins: Command): void {
  plugins
    .command("catalog")
    .description("list the reference plugins that install by name")
    .action((opts: JsonOption) => emitList(opts, listCatalog(), ["name", "summary"]));

  plugins
    .command("install <name>")
    .description("install or update a plugin from a Lua file or the catalogue (new source = new version; a source that an earlier version had makes that version current)")
    .requiredOption("--store <storeId>", "store id")
    .option("--file <file.lua>", "Lua source")
    .option("--catalog <name>", "a reference plugin from plugins-catalog/ (see `plugins catalog`)")
    .option("--secret <NAME=value>", "a secret (repeatable); merged into the stored ones. Visible in shell history: prefer --secrets-file", collect, [])
    .option("--secrets-file <file>", "secrets from a file ('-' for standard input): NAME=value lines, or a JSON object")
    .option("--disabled", "install disabled")
    .option("--allowed-sources <ranges>", "the provider's source ranges, comma-separated IPs or CIDRs (deliveries from elsewhere: 403); 'any' removes the restriction")
    .addHelpText("after", "\nExamples:\n  storefront plugins install pay --store st_… --catalog generic-hmac --secrets-file secrets.env\n  printf 'signingSecret=%s\\n' \"$SECRET\" | storefront plugins install pay --store st_… --secrets-file -\n")
    .action(install);

  plugins
    .command("secrets <name>")
    .description("replace a plugin's settings (secrets) whole; its code and version stay as they are")
    .requiredOption("--store <storeId>", "store id")
    .option("--secret <NAME=value>", "a setting (repeatable). Visible in shell history: prefer --secrets-file", collect, [])
    .option("--secrets-file <file>", "settings from a file ('-' for standard input): NAME=value lines, or a JSON object")
    .action(async (name: string, opts: StoreOption & { secret: string[]; secretsFile?: string }) => {
      const secrets = secretsOf(opts);
      await withServices(async (s) => printJson(await s.plugins.replaceSecrets(opts.store, name, secrets)));
    });
}

type InstallOptions = StoreOption & { file?: string; catalog?: string; secret: string[]; secretsFile?: string; disabled?: boolean; allowedSources?: string };

async function install(name: string, opts: InstallOptions): Promise<void> {
  if (opts.file && opts.catalog) throw new CliError("give --file or --catalog, not both");
  const secrets = secretsOf(opts);
  if (!opts.file && !opts.catalog && Object.keys(secrets).length === 0 && !opts.disabled && opts.allowedSources === undefined) {
    throw new CliError("give --file, --catalog, --secret, --secrets-file or --allowed-sources");
  }
  const allowedSources = opts.allowedSources === undefined ? undefined : opts.allowedSources.trim() === "any" ? null : opts.allowedSources.split(",").map((r) => r.trim()).filter((r) => r !== "");
  const source = opts.file ? readInput(opts.file, "--file").toString("utf8") : undefined;
  await withServices(async (s) => {
    const { created: _created, ...result } = await s.plugins.install(opts.store, name, {
      ...(source !== undefined ? { source } : {}),
      ...(opts.catalog ? { catalog: opts.catalog } : {}),
      ...(Object.keys(secrets).length > 0 ? { secrets } : {}),
      ...(opts.disabled ? { enabled: false } : {}),
      ...(allowedSources !== undefined ? { allowedSources } : {}),
    });
    printJson(result);
  });
}

/** `plugins list|show|versions|diff`: what is installed, its source and its history. */
function registerPluginInspectionCommands(plugins: Command): void {
  plugins
    .command("list")
    .description("list a store's plugins")
    .requiredOption("--store <storeId>", "store id")
    .action(async (opts: StoreOption) => {
      await withServices(async (s) => emitList(opts, await s.plugins.list(opts.store), ["name", "version", "enabled", "catalog", "secretNames", "updatedAt"]));
    });

  plugins
    .command("show <name>")
    .description("show a plugin and its current source (secret names only)")
    .requiredOption("--store <storeId>", "store id")
    .option("--version <n>", "print this version's source instead", positiveInt)
    .action(async (name: string, opts: StoreOption & { version?: number }) => {
      await withServices(async (s) => {
        if (opts.version !== undefined) {
          const version = { version: opts.version, source: await s.plugins.versionSource(opts.store, name, opts.version) };
          emit(opts, version, (v) => process.stdout.write(v.source));
          return;
        }
        emit(opts, await s.plugins.get(opts.store, name), ({ source, ...info }) => {
          printJson(info);
          process.stdout.write(`--- source (v${info.version}) ---\n${source}\n`);
        });
      });
    });

  plugins
    .command("versions <name>")
    .description("list a plugin's versions, newest first")
    .requiredOption("--store <storeId>", "store id")
    .action(async (name: string, opts: StoreOption) => {
      await withServices(async (s) => emitList(opts, await s.plugins.versions(opts.store, name), ["version", "current", "catalog", "sha256", "createdAt"]));
    });

  plugins
    .command("diff <name>")
    .description("the differences between two versions' sources (unified diff)")
    .requiredOption("--store <storeId>", "store id")
    .option("--from <n>", "the older side (default: the version before --to)", positiveInt)
    .option("--to <n>", "the newer side (default: the current version)", positiveInt)
    .action(async (name: string, opts: StoreOption & { from?: number; to?: number }) => {
      await withServices(async (s) => {
        const diff = await s.plugins.diff(opts.store, name, { ...(opts.from ? { from: opts.from } : {}), ...(opts.to ? { to: opts.to } : {}) });
        emit(opts, diff, (d) => process.stdout.write(d.identical ? `versions ${d.from.version} and ${d.to.version} of ${name} are identical\n` : d.diff));
      });
    });
}

/** `plugins rollback|delete|enable|disable`: which version runs, whether any does. */
function registerPluginLifecycleCommands(plugins: Command): void {
  plugins
    .command("rollback <name>")
    .description("make an earlier version current again (no new version is made; webhooks run it from now on)")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--version <n>", "the version to make current", positiveInt)
    .action(async (name: string, opts: StoreOption & { version: number }) => {
      await withServices(async (s) => printJson(await s.plugins.rollback(opts.store, name, opts.version)));
    });

  plugins
    .command("delete <name>")
    .description("remove a plugin with its versions and secrets (its deliveries stay; its webhooks answer 404)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (name: string, opts: StoreOption) => {
      await withServices(async (s) => {
        await s.plugins.remove(opts.store, name);
        emit(opts, { name, deleted: true }, () => process.stdout.write(`deleted plugin ${name} from store ${opts.store} (its deliveries stay)\n`));
      });
    });

  for (const [command, enabled] of [["enable", true], ["disable", false]] as const) {
    plugins
      .command(`${command} <name>`)
      .description(`${command} a plugin (a disabled plugin's webhooks answer 404 plugin_not_found)`)
      .requiredOption("--store <storeId>", "store id")
      .action(async (name: string, opts: StoreOption) => {
        await withServices(async (s) => printJson(await s.plugins.setEnabled(opts.store, name, enabled)));
      });
  }
}
