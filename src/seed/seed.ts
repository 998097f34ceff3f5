// Seeding: fills a store with realistic, reproducible data — from a 200-customer demo to millions of
// customers for benchmarks. The same seed gives the same store id (for a new store), ids and data.
// Last, the read model: every customer's and invoice's document, built by the same code as every write's.
import { sql } from "kysely";
import type { Db } from "../platform/db/database.ts";
import { isUniqueViolation } from "../platform/db/db-errors.ts";
import { AppError } from "../errors.ts";
import { rebuildReadModel } from "../readmodel/documents.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { Prng } from "./prng.ts";
import { generateCustomer } from "./seed.generator.ts";
import { buildPools } from "./seed.pools.ts";
import { SEED_TABLES, postgresSink, sqliteSink } from "./seed.sinks.ts";

export { SEED_AVERAGES } from "./seed.generator.ts";

export const DEMO_CUSTOMERS = 200;
const DAY = 86_400_000;
const SPAN_DAYS = 3 * 365;

export interface SeedOptions {
  customers: number;
  /** Any 32-bit integer; the same seed reproduces the same data. */
  seed: number;
  /** An existing store to add customers to; a new store (id derived from the seed) when absent. */
  storeId?: string;
  /** Name of the new store; a faker company name by default. */
  storeName?: string;
  /** End of the data's time span (epoch ms); the span covers the three years before it. Default: today 00:00 UTC. */
  until?: number;
  /** Customers per transaction. */
  batchSize?: number;
  onProgress?: (progress: SeedProgress) => void;
}

/**
 * "generate": `done` of `total` customers generated (and staged, on SQLite); "load": `done` of `total` rows
 * moved into the store's tables (SQLite), `table` the last one completed; "documents": `done` of `total`
 * customers and invoices given their read-model document.
 */
export type SeedProgress =
  | { phase: "generate"; done: number; total: number }
  | { phase: "load"; done: number; total: number; table: string }
  | { phase: "documents"; done: number; total: number };

export interface SeedResult {
  storeId: string;
  storeName: string;
  createdStore: boolean;
  seed: number;
  customers: number;
  rows: number;
  from: number;
  until: number;
  ms: number;
}

export const startOfTodayUtc = (now = Date.now()): number => now - (now % DAY);

/** Writes the store (unless it exists) and `customers` customers with their nested data. */
export async function seedStore(db: Db, options: SeedOptions): Promise<SeedResult> {
  if (!Number.isSafeInteger(options.customers) || options.customers < 0) {
    throw new AppError("invalid_request", "customers must be a whole number ≥ 0", { param: "customers" });
  }
  const started = performance.now();
  const until = options.until ?? startOfTodayUtc();
  const from = until - SPAN_DAYS * DAY;
  const pools = buildPools(options.seed);

  let storeId: string;
  let storeName: string;
  let createdStore = false;
  if (options.storeId !== undefined) {
    const store = await db.kysely.selectFrom("stores").select(["id", "name"]).where("id", "=", options.storeId).executeTakeFirst();
    if (!store) throw new AppError("store_not_found", `No store ${options.storeId}`, { param: "storeId" });
    ({ id: storeId, name: storeName } = store);
  } else {
    storeId = new Prng(options.seed, "store").id("st");
    storeName = options.storeName ?? pools.companyName;
    const exists = await db.kysely.selectFrom("stores").select("id").where("id", "=", storeId).executeTakeFirst();
    if (exists) {
      throw new AppError("conflict", `Seed ${options.seed} already created store ${storeId}; pass --store ${storeId} with another --seed to add to it`, {
        param: "seed",
      });
    }
    await db.kysely.insertInto("stores").values({ id: storeId, name: storeName, created_at: from - DAY }).execute();
    createdStore = true;
  }

  const sink = db.dialect === "sqlite" ? sqliteSink(db.sqlite!) : postgresSink(db.pgPool!);
  const batchSize = options.batchSize ?? (db.dialect === "sqlite" ? 5000 : 1000);
  // The row stream depends on the store too, so one seed can fill several stores without id collisions.
  const ctx = { rng: new Prng(options.seed, `rows:${storeId}`), pools, sink, storeId, from, until, total: options.customers };
  let rows = 0;
  try {
    for (let done = 0; done < options.customers; ) {
      const end = Math.min(options.customers, done + batchSize);
      for (; done < end; done++) rows += generateCustomer(ctx, done);
      await sink.flush();
      options.onProgress?.({ phase: "generate", done, total: options.customers });
    }
    await sink.finish((p) => options.onProgress?.({ phase: "load", done: p.rows, total: p.total, table: p.table }));
  } catch (err) {
    await sink.abort();
    if (isUniqueViolation(err)) {
      throw new AppError("conflict", `Seed ${options.seed} was already loaded into store ${storeId} (ids collide); use another --seed`, { param: "seed" });
    }
    throw err;
  }
  const invoices = await db.kysely
    .selectFrom("invoices")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("store_id", "=", storeId)
    .executeTakeFirstOrThrow();
  const documents = Number(invoices.n) + (await countCustomers(db, storeId));
  // rebuildReadModel reads with a large page cache on SQLite (a 1M-customer store in minutes, not an hour).
  await rebuildReadModel(db.kysely, storeId, (done) => {
    if (done % 10_000 < 500 || done === documents) options.onProgress?.({ phase: "documents", done, total: documents });
  });
  // PostgreSQL: a bulk load leaves every page of the new rows unmarked in the visibility map until
  // autovacuum gets to them, and until then each index-only page-key scan also reads the rows themselves
  // (`Heap Fetches`). Vacuumed now, as after any bulk load, with statistics for the documents too.
  if (db.dialect === "postgres") await sql.raw(`vacuum (analyze) ${[...SEED_TABLES, "customer_views", "invoice_views"].join(", ")}`).execute(db.kysely);
  return { storeId, storeName, createdStore, seed: options.seed, customers: options.customers, rows, from, until, ms: performance.now() - started };
}

async function countCustomers(db: Db, storeId: string): Promise<number> {
  const r = await db.kysely
    .selectFrom("customers")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("store_id", "=", storeId)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export interface SeedWithKeyResult extends SeedResult {
  /** A new API key of the store (both read scopes), shown once. */
  key: string;
}

/** The database to seed and the stores service that makes the key. */
export interface SeedWithKeyDeps {
  db: Db;
  stores: Pick<StoresService, "createKey">;
}

/** Seeds, then creates an API key through the stores service (crypto-random, never derived from the seed). */
export async function seedWithKey(deps: SeedWithKeyDeps, options: SeedOptions): Promise<SeedWithKeyResult> {
  const result = await seedStore(deps.db, options);
  const { key } = await deps.stores.createKey(result.storeId, { name: "seed" });
  return { ...result, key };
}
