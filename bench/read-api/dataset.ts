// The benchmark's databases: N seeded customers (seed 42, a fixed time span) on SQLite under bench/data/,
// or in a PostgreSQL database of their own. Seeded once and reused: a JSON manifest beside the data says
// what is in it and which ids the filtered cases use.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { loadConfig } from "../../src/config.ts";
import { type Db, openDatabase } from "../../src/platform/db/database.ts";
import { buildPools } from "../../src/seed/seed.pools.ts";
import { type SeedProgress, seedStore } from "../../src/seed/seed.ts";

export const DATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../data");
export const BENCH_SEED = 42;
/** A fixed end of the data's three-year span, so every run measures the same rows. */
export const BENCH_UNTIL = Date.parse("2026-01-01T00:00:00.000Z");
export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** Bump when the seed's output changes, so cached datasets are seeded again. */
const DATASET_VERSION = 3;

export type BenchDialect = "sqlite" | "postgres";

export interface Dataset {
  version: number;
  dialect: BenchDialect;
  customers: number;
  storeId: string;
  /** Rows written by the seed and how long it took (when this run seeded it). */
  seed: { rows: number; seconds: number; rowsPerSecond: number };
  filters: {
    /** A date window of three months in the middle of the span. */
    createdAtFrom: string;
    createdAtTo: string;
    /** The catalogue's least-sold variant: "customers who bought / invoices containing this variant". */
    variantId: string;
    /** Invoice items with that variant (the `id` filter's candidate set grows with it). */
    variantItems: number;
    /** The customer of the newest invoice. */
    customerId: string;
  };
}

export function sqliteFile(customers: number): string {
  return path.join(DATA_DIR, `read-api-${customers}.db`);
}

function manifestFile(dialect: BenchDialect, customers: number): string {
  return path.join(DATA_DIR, `read-api-${dialect}-${customers}.json`);
}

function pgUrl(customers: number): string {
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/bench_read_api_${customers}`;
  return url.toString();
}

export function databaseUrl(d: Pick<Dataset, "dialect" | "customers">): string {
  return d.dialect === "sqlite" ? `sqlite:${sqliteFile(d.customers)}` : pgUrl(d.customers);
}

/** The dataset for `customers` customers, seeding it first when it is not there yet. */
export async function ensureDataset(dialect: BenchDialect, customers: number, log: (line: string) => void): Promise<Dataset> {
  mkdirSync(DATA_DIR, { recursive: true });
  const manifest = manifestFile(dialect, customers);
  if (existsSync(manifest)) {
    const cached = JSON.parse(readFileSync(manifest, "utf8")) as Dataset;
    if (cached.version === DATASET_VERSION && (dialect === "postgres" || existsSync(sqliteFile(customers)))) return cached;
  }

  let url = databaseUrl({ dialect, customers });
  let partial: string | null = null;
  if (dialect === "sqlite") {
    // Seeded under a temporary name and renamed when complete, so an interrupted seed is never reused.
    partial = sqliteFile(customers).replace(/\.db$/, ".partial.db");
    for (const f of [partial, `${partial}-wal`, `${partial}-shm`]) rmSync(f, { force: true });
    url = `sqlite:${partial}`;
  } else {
    const name = new URL(url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
    await admin.end();
  }

  const config = loadConfig({ DATABASE_URL: url });
  const db = openDatabase(config.database);
  let dataset: Dataset;
  try {
    await db.migrate();
    log(`seeding ${customers.toLocaleString("en-US")} customers on ${dialect} (seed ${BENCH_SEED}) …`);
    let lastLine = 0;
    const result = await seedStore(db, {
      customers,
      seed: BENCH_SEED,
      until: BENCH_UNTIL,
      storeName: "Read API benchmark",
      onProgress: (p: SeedProgress) => {
        const now = performance.now();
        if (now - lastLine < 10_000 && p.done !== p.total) return;
        lastLine = now;
        log(`  ${p.phase}: ${p.done.toLocaleString("en-US")} / ${p.total.toLocaleString("en-US")}${p.phase === "load" ? ` rows (${p.table} done)` : p.phase === "documents" ? " documents" : " customers"}`);
      },
    });
    const seconds = result.ms / 1000;
    log(`  seeded ${result.rows.toLocaleString("en-US")} rows in ${seconds.toFixed(0)} s (${Math.round(result.rows / seconds).toLocaleString("en-US")} rows/s)`);

    dataset = {
      version: DATASET_VERSION,
      dialect,
      customers,
      storeId: result.storeId,
      seed: { rows: result.rows, seconds: Math.round(seconds), rowsPerSecond: Math.round(result.rows / seconds) },
      filters: await chooseFilters(db, result.storeId),
    };
  } finally {
    await db.close();
  }
  if (partial !== null) renameSync(partial, sqliteFile(customers));
  writeFileSync(manifest, JSON.stringify(dataset, null, 2) + "\n");
  return dataset;
}

/** The values of the filtered cases: a three-month window, a product variant, a customer. */
export async function chooseFilters(db: Db, storeId: string): Promise<Dataset["filters"]> {
  const newest = await db.kysely
    .selectFrom("invoices")
    .select("customer_id")
    .where("store_id", "=", storeId)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(1)
    .executeTakeFirstOrThrow();
  // The pool's variants are ordered by popularity (weights fall with the rank): the last sells least.
  const variant = buildPools(BENCH_SEED).variants.values.at(-1)!;
  const items = await db.kysely
    .selectFrom("invoice_items")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("store_id", "=", storeId)
    .where("product_variant_id", "=", variant.id)
    .executeTakeFirstOrThrow();
  const day = 86_400_000;
  const middle = BENCH_UNTIL - 18 * 30 * day;
  return {
    createdAtFrom: new Date(middle).toISOString().slice(0, 10),
    createdAtTo: new Date(middle + 90 * day).toISOString().slice(0, 10),
    variantId: variant.id,
    variantItems: Number(items.n),
    customerId: newest.customer_id,
  };
}
