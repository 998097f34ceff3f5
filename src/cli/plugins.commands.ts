// `storefront plugins …`, `simulate`, `deliveries …`, `customers create`, `checkout`: the merchant's loop
// on the local database, through the same services and in the same shapes as the admin API.
import { InvalidArgumentError, type Command } from "commander";
import { AppError } from "../errors.ts";
import { listCatalog } from "../plugins/catalog.ts";
import { replayView, simulationView } from "../payments/payment-views.ts";
import { CliError, emit, emitList, type JsonOption, printJson, readInput, withServices } from "./context.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

function parseHeaders(lines: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(":");
    if (i <= 0) throw new CliError(`header "${line}" is not "name: value"`);
    out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

function parsePairs(pairs: string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const i = pair.indexOf("=");
    if (i <= 0) throw new CliError(`${what} "${pair}" is not NAME=value`);
    out[pair.slice(0, i)] = pair.slice(i + 1);
  }
  return out;
}

/**
 * Secrets from a file or standard input, so they stay out of shell history and `ps`: a JSON object of
 * strings, or `NAME=value` lines (the value is everything after the first `=`, as is; blank lines and
 * lines starting with # are skipped).
 */
export function parseSecretsFile(text: string, file: string): Record<string, string> {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (err) {
      throw new CliError(`--secrets-file ${file} is not valid JSON: ${(err as Error).message}`);
    }
    const entries = Object.entries(parsed as Record<string, unknown>);
    const bad = entries.find(([, v]) => typeof v !== "string");
    if (bad) throw new CliError(`--secrets-file ${file}: the value of "${bad[0]}" must be a string`);
    return Object.fromEntries(entries) as Record<string, string>;
  }
  const out: Record<string, string> = {};
  for (const [n, raw] of text.split("\n").entries()) {
    const line = raw.replace(/\r$/, "");
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const i = line.indexOf("=");
    if (i <= 0) throw new CliError(`--secrets-file ${file} line ${n + 1} is not NAME=value`);
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

const int = (v: string) => {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive whole number");
  return n;
};

/** `variant:quantity:price[:coupon]` → a checkout item, or a CliError naming the part that is wrong. */
export function parseItem(spec: string): { productVariantId: string; quantity: number; price: number; couponId?: string } {
  const parts = spec.split(":");
  const [productVariantId, quantity, price, couponId] = parts;
  const usage = `item "${spec}" is not variant:quantity:price[:coupon] (for example ebook-pdf:1:49.99)`;
  if (parts.length < 3 || parts.length > 4 || !productVariantId || !quantity || !price) throw new CliError(usage);
  if (!/^\d+$/.test(quantity) || Number(quantity) < 1 || !Number.isSafeInteger(Number(quantity))) throw new CliError(`${usage}: quantity "${quantity}" must be a whole number of at least 1`);
  if (!/^\d+(\.\d{1,2})?$/.test(price)) throw new CliError(`${usage}: price "${price}" must be US dollars with at most two decimals`);
  return { productVariantId, quantity: Number(quantity), price: Number(price), ...(couponId ? { couponId } : {}) };
}

type StoreOption = JsonOption & { store: string };

export function registerPluginCommands(program: Command): void {
  const plugins = program.command("plugins").description("install and manage a store's payment plugins");

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
    .action(async (name: string, opts: StoreOption & { file?: string; catalog?: string; secret: string[]; secretsFile?: string; disabled?: boolean; allowedSources?: string }) => {
      if (opts.file && opts.catalog) throw new CliError("give --file or --catalog, not both");
      const secrets = {
        ...(opts.secretsFile === undefined ? {} : parseSecretsFile(readInput(opts.secretsFile, "--secrets-file").toString("utf8"), opts.secretsFile)),
        ...parsePairs(opts.secret, "secret"),
      };
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
    });

  plugins
    .command("secrets <name>")
    .description("replace a plugin's settings (secrets) whole; its code and version stay as they are")
    .requiredOption("--store <storeId>", "store id")
    .option("--secret <NAME=value>", "a setting (repeatable). Visible in shell history: prefer --secrets-file", collect, [])
    .option("--secrets-file <file>", "settings from a file ('-' for standard input): NAME=value lines, or a JSON object")
    .action(async (name: string, opts: StoreOption & { secret: string[]; secretsFile?: string }) => {
      const secrets = {
        ...(opts.secretsFile === undefined ? {} : parseSecretsFile(readInput(opts.secretsFile, "--secrets-file").toString("utf8"), opts.secretsFile)),
        ...parsePairs(opts.secret, "secret"),
      };
      await withServices(async (s) => printJson(await s.plugins.replaceSecrets(opts.store, name, secrets)));
    });

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
    .option("--version <n>", "print this version's source instead", int)
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
    .option("--from <n>", "the older side (default: the version before --to)", int)
    .option("--to <n>", "the newer side (default: the current version)", int)
    .action(async (name: string, opts: StoreOption & { from?: number; to?: number }) => {
      await withServices(async (s) => {
        const diff = await s.plugins.diff(opts.store, name, { ...(opts.from ? { from: opts.from } : {}), ...(opts.to ? { to: opts.to } : {}) });
        emit(opts, diff, (d) => process.stdout.write(d.identical ? `versions ${d.from.version} and ${d.to.version} of ${name} are identical\n` : d.diff));
      });
    });

  plugins
    .command("rollback <name>")
    .description("make an earlier version current again (no new version is made; webhooks run it from now on)")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--version <n>", "the version to make current", int)
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

  program
    .command("simulate")
    .description("run a plugin against a body and headers without changing anything; exits 1 when the run fails")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--plugin <name>", "plugin name")
    .requiredOption("--body <file>", "file with the raw webhook body ('-' for standard input)")
    .option("--header <'name: value'>", "a request header (repeatable)", collect, [])
    .option("--query <name=value>", "a query parameter (repeatable)", collect, [])
    .option("--version <n>", "plugin version (default: current)", int)
    .action(async (opts: StoreOption & { plugin: string; body: string; header: string[]; query: string[]; version?: number }) => {
      const body = readInput(opts.body, "--body");
      const headers = parseHeaders(opts.header);
      const query = parsePairs(opts.query, "query parameter");
      await withServices(async (s) => {
        const out = simulationView(await s.webhooks.simulate(opts.store, opts.plugin, { body, headers, query, ...(opts.version ? { version: opts.version } : {}) }));
        printJson(out);
        if (out.error !== null) process.exitCode = 1;
      });
    });

  const deliveries = program.command("deliveries").description("the webhook delivery log");
  // `deliveries list` and `deliveries tail` (filters, following) are in deliveries.commands.ts.
  deliveries
    .command("show <deliveryId>")
    .description("a delivery: request, result, logs, fetches, response")
    .requiredOption("--store <storeId>", "store id")
    .action(async (id: string, opts: StoreOption) => {
      await withServices(async (s) => {
        const d = await s.deliveries.get(opts.store, id);
        if (!d) throw new AppError("delivery_not_found", `No delivery ${id} in store ${opts.store}`);
        printJson(d);
      });
    });
  deliveries
    .command("replay <deliveryId>")
    .description("run a stored delivery again through the plugin's current version (recorded as a new delivery)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (id: string, opts: StoreOption) => {
      await withServices(async (s) => printJson(replayView(await s.webhooks.replay(opts.store, id, "cli"), id)));
    });
  deliveries
    .command("prune")
    .description("delete deliveries older than DELIVERY_RETENTION_DAYS")
    .action(async (opts: JsonOption) => {
      await withServices(async (s) => {
        const deleted = await s.webhooks.pruneDeliveries();
        emit(opts, { deleted }, () => process.stdout.write(`deleted ${deleted} deliveries\n`));
      });
    });

  const customers = program.command("customers").description("a store's customers");
  customers
    .command("create")
    .description("create a customer")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--email <email>", "e-mail address")
    .option("--discord-id <id>", "linked chat account id")
    .option("--discord-email <email>", "linked chat account e-mail")
    .action(async (opts: StoreOption & { email: string; discordId?: string; discordEmail?: string }) => {
      await withServices(async (s) =>
        printJson(await s.customers.create(opts.store, { email: opts.email, ...(opts.discordId ? { discordId: opts.discordId } : {}), ...(opts.discordEmail ? { discordEmail: opts.discordEmail } : {}) })),
      );
    });

  program
    .command("checkout")
    .description("create a pending invoice (the storefront's checkout)")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--customer <customerId>", "customer id")
    .requiredOption("--item <variant:quantity:price[:coupon]>", "a line item (repeatable), price in USD", collect, [])
    .option("--payment-method <name>", "payment method", "stripe")
    .option("--field <key=value>", "a custom field of type text (repeatable)", collect, [])
    .action(async (opts: StoreOption & { customer: string; item: string[]; paymentMethod: string; field: string[] }) => {
      const items = opts.item.map(parseItem);
      const fields = Object.entries(parsePairs(opts.field, "field")).map(([key, value]) => ({ key, value, type: "text" }));
      await withServices(async (s) => printJson(await s.invoices.checkout(opts.store, { customerId: opts.customer, paymentMethod: opts.paymentMethod, items, ...(fields.length ? { fields } : {}) })));
    });
}
