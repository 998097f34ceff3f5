// `storefront plugins …`, `simulate`, `deliveries …`, `customers create`, `checkout`: the merchant's loop
// on the local database, through the same services as the admin API.
import { readFileSync } from "node:fs";
import { InvalidArgumentError, type Command } from "commander";
import { AppError } from "../errors.ts";
import { listCatalog } from "../plugins/catalog.ts";
import { printJson, printTable, withServices } from "./context.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

function parseHeaders(lines: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(":");
    if (i <= 0) throw new InvalidArgumentError(`header "${line}" is not "name: value"`);
    out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

function parseSecrets(pairs: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const i = pair.indexOf("=");
    if (i <= 0) throw new InvalidArgumentError(`secret "${pair}" is not NAME=value`);
    out[pair.slice(0, i)] = pair.slice(i + 1);
  }
  return out;
}

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive whole number");
  return n;
};

export function registerPluginCommands(program: Command): void {
  const plugins = program.command("plugins").description("install and manage a store's payment plugins");

  plugins
    .command("catalog")
    .description("list the reference plugins that install by name")
    .action(() => printTable(listCatalog() as unknown as Record<string, unknown>[], ["name", "summary"]));

  plugins
    .command("install <name>")
    .description("install or update a plugin from a Lua file or the catalogue (new source = new version)")
    .requiredOption("--store <storeId>", "store id")
    .option("--file <file.lua>", "Lua source")
    .option("--catalog <name>", "a reference plugin from plugins-catalog/")
    .option("--secret <NAME=value>", "a secret (repeatable); merged into the stored ones", collect, [])
    .option("--disabled", "install disabled")
    .action(async (name: string, opts: { store: string; file?: string; catalog?: string; secret: string[]; disabled?: boolean }) => {
      if (!opts.file && !opts.catalog && opts.secret.length === 0) throw new InvalidArgumentError("give --file, --catalog or --secret");
      await withServices(async (s) => {
        const result = await s.plugins.install(opts.store, name, {
          ...(opts.file ? { source: readFileSync(opts.file, "utf8") } : {}),
          ...(opts.catalog ? { catalog: opts.catalog } : {}),
          ...(opts.secret.length > 0 ? { secrets: parseSecrets(opts.secret) } : {}),
          ...(opts.disabled ? { enabled: false } : {}),
        });
        printJson(result);
      });
    });

  plugins
    .command("list")
    .description("list a store's plugins")
    .requiredOption("--store <storeId>", "store id")
    .action(async (opts: { store: string }) => {
      await withServices(async (s) => {
        const rows = (await s.plugins.list(opts.store)).map((p) => ({ ...p, secretNames: p.secretNames.join(",") }));
        printTable(rows, ["name", "version", "enabled", "catalog", "secretNames", "updatedAt"]);
      });
    });

  plugins
    .command("show <name>")
    .description("show a plugin and its current source (secret names only)")
    .requiredOption("--store <storeId>", "store id")
    .option("--version <n>", "print this version's source instead", int)
    .action(async (name: string, opts: { store: string; version?: number }) => {
      await withServices(async (s) => {
        if (opts.version !== undefined) {
          process.stdout.write(await s.plugins.versionSource(opts.store, name, opts.version));
          return;
        }
        const { source, ...info } = await s.plugins.get(opts.store, name);
        printJson(info);
        process.stdout.write(`--- source (v${info.version}) ---\n${source}\n`);
      });
    });

  plugins
    .command("versions <name>")
    .description("list a plugin's versions")
    .requiredOption("--store <storeId>", "store id")
    .action(async (name: string, opts: { store: string }) => {
      await withServices(async (s) => printTable((await s.plugins.versions(opts.store, name)) as unknown as Record<string, unknown>[], ["version", "current", "catalog", "sha256", "createdAt"]));
    });

  for (const [command, enabled] of [["enable", true], ["disable", false]] as const) {
    plugins
      .command(`${command} <name>`)
      .description(`${command} a plugin (a disabled plugin's webhooks answer 404 plugin_not_found)`)
      .requiredOption("--store <storeId>", "store id")
      .action(async (name: string, opts: { store: string }) => {
        await withServices(async (s) => printJson(await s.plugins.setEnabled(opts.store, name, enabled)));
      });
  }

  program
    .command("simulate")
    .description("run a plugin against a body and headers without changing anything")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--plugin <name>", "plugin name")
    .requiredOption("--body <file>", "file with the raw webhook body ('-' for standard input)")
    .option("--header <'name: value'>", "a request header (repeatable)", collect, [])
    .option("--query <name=value>", "a query parameter (repeatable)", collect, [])
    .option("--version <n>", "plugin version (default: current)", int)
    .action(async (opts: { store: string; plugin: string; body: string; header: string[]; query: string[]; version?: number }) => {
      const body = readFileSync(opts.body === "-" ? 0 : opts.body);
      await withServices(async (s) => {
        const out = await s.webhooks.simulate(opts.store, opts.plugin, {
          body,
          headers: parseHeaders(opts.header),
          query: parseSecrets(opts.query),
          ...(opts.version ? { version: opts.version } : {}),
        });
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
    .action(async (id: string, opts: { store: string }) => {
      await withServices(async (s) => {
        const d = await s.deliveries.get(opts.store, id);
        if (!d) throw new AppError("delivery_not_found", `No delivery ${id} in store ${opts.store}`);
        printJson(d);
      });
    });
  deliveries
    .command("replay <deliveryId>")
    .description("run a stored delivery again through the plugin's current version")
    .requiredOption("--store <storeId>", "store id")
    .action(async (id: string, opts: { store: string }) => {
      await withServices(async (s) => printJson(await s.webhooks.replay(opts.store, id, "cli")));
    });
  deliveries
    .command("prune")
    .description("delete deliveries older than DELIVERY_RETENTION_DAYS")
    .action(async () => {
      await withServices(async (s) => process.stdout.write(`deleted ${await s.webhooks.pruneDeliveries()} deliveries\n`));
    });

  const customers = program.command("customers").description("a store's customers");
  customers
    .command("create")
    .description("create a customer")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--email <email>", "e-mail address")
    .option("--discord-id <id>", "linked chat account id")
    .option("--discord-email <email>", "linked chat account e-mail")
    .action(async (opts: { store: string; email: string; discordId?: string; discordEmail?: string }) => {
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
    .action(async (opts: { store: string; customer: string; item: string[]; paymentMethod: string; field: string[] }) => {
      const items = opts.item.map((spec) => {
        const [productVariantId, quantity, price, couponId] = spec.split(":");
        if (!productVariantId || !quantity || !price) throw new InvalidArgumentError(`item "${spec}" is not variant:quantity:price[:coupon]`);
        return { productVariantId, quantity: Number(quantity), price: Number(price), ...(couponId ? { couponId } : {}) };
      });
      const fields = Object.entries(parseSecrets(opts.field)).map(([key, value]) => ({ key, value, type: "text" }));
      await withServices(async (s) => printJson(await s.invoices.checkout(opts.store, { customerId: opts.customer, paymentMethod: opts.paymentMethod, items, ...(fields.length ? { fields } : {}) })));
    });
}
