// `storefront migrate`, `storefront stores create|list`, `storefront keys create|list|revoke`.
import type { Command } from "commander";
import { printJson, printTable, withServices } from "./context.ts";

export function registerStoreCommands(program: Command): void {
  program
    .command("migrate")
    .description("apply database migrations (serve also does this at start-up)")
    .action(async () => {
      await withServices(async (s) => {
        process.stdout.write(`database is up to date (${s.db.dialect})\n`);
      });
    });

  const stores = program.command("stores").description("manage stores");
  stores
    .command("create <name>")
    .description("create a store")
    .action(async (name: string) => {
      await withServices(async (s) => printJson(await s.stores.createStore(name)));
    });
  stores
    .command("list")
    .description("list stores")
    .action(async () => {
      await withServices(async (s) => printTable((await s.stores.listStores()) as unknown as Record<string, unknown>[], ["id", "name", "createdAt"]));
    });

  const keys = program.command("keys").description("manage a store's API keys");
  keys
    .command("create")
    .description("create an API key; the key is printed once and never stored")
    .requiredOption("--store <storeId>", "store id")
    .option("--scopes <scopes>", "comma-separated: customers:read,invoices:read,events:read (default: all three)")
    .option("--name <name>", "a label for the key")
    .action(async (opts: { store: string; scopes?: string; name?: string }) => {
      await withServices(async (s) => {
        const created = await s.stores.createKey(opts.store, {
          ...(opts.scopes ? { scopes: opts.scopes.split(",").map((x) => x.trim()) } : {}),
          ...(opts.name ? { name: opts.name } : {}),
        });
        printJson(created);
      });
    });
  keys
    .command("list")
    .description("list a store's keys (prefixes only)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (opts: { store: string }) => {
      await withServices(async (s) => {
        const rows = (await s.stores.listKeys(opts.store)).map((k) => ({ ...k, scopes: k.scopes.join(",") }));
        printTable(rows, ["id", "prefix", "name", "scopes", "createdAt", "revokedAt"]);
      });
    });
  keys
    .command("revoke")
    .description("revoke a key")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--key <keyId>", "key id")
    .action(async (opts: { store: string; key: string }) => {
      await withServices(async (s) => {
        await s.stores.revokeKey(opts.store, opts.key);
        process.stdout.write(`revoked ${opts.key}\n`);
      });
    });
}
