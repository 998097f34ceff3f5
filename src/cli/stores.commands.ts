// `storefront migrate`, `storefront stores create|list`, `storefront keys create|list|revoke|set-version`,
// `storefront versions`.
import type { Command } from "commander";
import { SCHEMA_VERSION } from "../platform/db/migrate.ts";
import { knownVersions } from "../versioning/registry.ts";
import { SCOPES } from "../stores/stores.service.ts";
import { emit, emitList, type JsonOption, printJson, withServices } from "./context.ts";

export function registerStoreCommands(program: Command): void {
  registerMigrateCommand(program);
  registerStoresGroup(program);
  registerKeyCommands(program);
  registerVersionsCommand(program);
}

function registerMigrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("apply database migrations (serve also does this at start-up); prints each one applied")
    .action(async (opts: JsonOption) => {
      await withServices(async (s) => {
        const applied = s.appliedMigrations;
        emit(opts, { dialect: s.db.dialect, schema: SCHEMA_VERSION, applied }, () => {
          for (const m of applied) process.stdout.write(`applied ${m.name} in ${m.durationMs} ms\n`);
          const what = applied.length === 0 ? "up to date, nothing to apply" : `applied ${applied.length} migration${applied.length === 1 ? "" : "s"}`;
          process.stdout.write(`schema ${SCHEMA_VERSION}: ${what} (${s.db.dialect})\n`);
        });
      });
    });
}

/** `stores create|list`. */
function registerStoresGroup(program: Command): void {
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
    .action(async (opts: JsonOption) => {
      await withServices(async (s) => emitList(opts, await s.stores.listStores(), ["id", "name", "createdAt"]));
    });
}

/** `keys create|list|set-version|revoke`. */
function registerKeyCommands(program: Command): void {
  const keys = program.command("keys").description("manage a store's API keys");
  keys
    .command("create")
    .description("create an API key; the key is printed once and never stored")
    .requiredOption("--store <storeId>", "store id")
    .option("--scopes <scopes>", `comma-separated, of ${SCOPES.join(",")} (default: all)`)
    .option("--name <name>", "a label for the key")
    .option("--api-version <version>", "API version the key is answered in (default: the current one)")
    .action(async (opts: { store: string; scopes?: string; name?: string; apiVersion?: string }) => {
      await withServices(async (s) => {
        const created = await s.stores.createKey(opts.store, {
          ...(opts.scopes ? { scopes: opts.scopes.split(",").map((x) => x.trim()) } : {}),
          ...(opts.name ? { name: opts.name } : {}),
          ...(opts.apiVersion ? { version: opts.apiVersion } : {}),
        });
        printJson(created);
      });
    });
  keys
    .command("list")
    .description("list a store's keys (prefixes only)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (opts: JsonOption & { store: string }) => {
      await withServices(async (s) => emitList(opts, await s.stores.listKeys(opts.store), ["id", "prefix", "name", "scopes", "version", "createdAt", "revokedAt"]));
    });
  keys
    .command("set-version")
    .description("change the API version a key is answered in")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--key <keyId>", "key id")
    .requiredOption("--api-version <version>", "one of the versions `storefront versions` lists")
    .action(async (opts: { store: string; key: string; apiVersion: string }) => {
      await withServices(async (s) => printJson(await s.stores.setKeyVersion(opts.store, opts.key, opts.apiVersion)));
    });
  keys
    .command("revoke")
    .description("revoke a key")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--key <keyId>", "the key's id (`keys list` shows it), not the key itself")
    .action(async (opts: JsonOption & { store: string; key: string }) => {
      await withServices(async (s) => {
        await s.stores.revokeKey(opts.store, opts.key);
        emit(opts, { id: opts.key, revoked: true }, () => process.stdout.write(`revoked ${opts.key}\n`));
      });
    });
}

function registerVersionsCommand(program: Command): void {
  program
    .command("versions")
    .description("list the API versions this service serves, newest (current) first")
    .action((opts: JsonOption) => {
      const rows = knownVersions().map((v) => ({
        version: v.version,
        current: v.current,
        sunset: v.deprecationHeaders?.sunset ?? null,
        summary: v.summary,
      }));
      emitList(opts, rows, ["version", "current", "sunset", "summary"], (r) => ({ ...r, current: r.current ? "yes" : "" }));
    });
}
