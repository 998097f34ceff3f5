// Where a list page's time goes, in process and without HTTP: each benchmark case's repository call timed
// (total, and inside SQL), with every SQL statement, its own time and its SQLite query plan. For finding
// why a case is slow; run.ts measures the HTTP figures.
//
//   node bench/read-api/explain.ts [--size 1000000] [--plans] [--cache-size -262144] [--mmap 30000000000]
//     [--no-statement-cache]   Kysely preparing every statement again, as before src/platform/db/statement-cache.ts
//                              (only the rare statements now: the page's own are prepared once, Db.prepared)
//     [--popular-variant]   also the catalogue's best-selling variant as `id` (slow: scales with its sales)
//     [--filters]   also the status and email filters (a rare status, two statuses, an e-mail)
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { createCustomersRepository } from "../../src/readmodel/customer-documents.ts";
import { type Prepared, type PreparedStatement, sqlitePrepared } from "../../src/platform/db/database.ts";
import type { Database } from "../../src/platform/db/schema.ts";
import { withStatementCache } from "../../src/platform/db/statement-cache.ts";
import { createInvoicesRepository } from "../../src/readmodel/invoice-documents.ts";
import { encodeCursor, parseListQuery } from "../../src/lib/list-query.ts";
import { pageJson } from "../../src/readmodel/paging.ts";
import { buildPools } from "../../src/seed/seed.pools.ts";
import { BENCH_SEED, type Dataset, DATA_DIR, sqliteFile } from "./dataset.ts";
import { INVOICE_STATUSES } from "../../src/schemas/invoice-statuses.ts";

const { values: args } = parseArgs({
  options: {
    size: { type: "string", default: "1000000" },
    plans: { type: "boolean", default: false },
    "cache-size": { type: "string" },
    mmap: { type: "string" },
    runs: { type: "string", default: "100" },
    "popular-variant": { type: "boolean", default: false },
    "no-statement-cache": { type: "boolean", default: false },
    filters: { type: "boolean", default: false },
  },
});
const customers = Number(args.size);
const dataset = JSON.parse(readFileSync(`${DATA_DIR}/read-api-sqlite-${customers}.json`, "utf8")) as Dataset;
const handle = new SQLite(sqliteFile(customers));
// The service's own settings (src/platform/db/database.ts), then the ones under test.
handle.pragma("journal_mode = WAL");
handle.pragma("synchronous = NORMAL");
if (args["cache-size"] !== undefined) handle.pragma(`cache_size = ${Number(args["cache-size"])}`);
if (args.mmap !== undefined) handle.pragma(`mmap_size = ${Number(args.mmap)}`);

const statements: { sql: string; parameters: readonly unknown[]; ms: number }[] = [];
const db = new Kysely<Database>({
  dialect: new SqliteDialect({ database: args["no-statement-cache"] ? handle : withStatementCache(handle) }),
  log: (event) => {
    if (event.level === "query") statements.push({ sql: event.query.sql, parameters: event.query.parameters, ms: event.queryDurationMillis });
  },
});
/** The page statements, timed and recorded like Kysely's. */
function loggedPrepared(inner: Prepared): Prepared {
  return {
    async all<R>(statement: PreparedStatement, params: readonly unknown[]) {
      const started = performance.now();
      const rows = await inner.all<R>(statement, params);
      statements.push({ sql: statement.sql, parameters: params, ms: performance.now() - started });
      return rows;
    },
  };
}
const source = { kysely: db, dialect: "sqlite" as const, prepared: loggedPrepared(sqlitePrepared(handle)) };
const repos = { customers: createCustomersRepository(source), invoices: createInvoicesRepository(source) };

const f = dataset.filters;
const window = { createdAtFrom: f.createdAtFrom, createdAtTo: f.createdAtTo };
const cases: [string, keyof typeof repos, Record<string, string>][] = [
  ["customers", "customers", {}],
  ["customers-window", "customers", window],
  ["customers-id-variant", "customers", { id: f.variantId }],
  ["invoices", "invoices", {}],
  ["invoices-window", "invoices", window],
  ["invoices-id-variant", "invoices", { id: f.variantId }],
  ["invoices-id-customer", "invoices", { id: f.customerId }],
];
if (args.filters) {
  const newest = handle
    .prepare("select email from customers where store_id = ? order by created_at desc, id desc limit 1")
    .get(dataset.storeId) as { email: string };
  cases.push(
    ["customers-status-refunded", "customers", { status: "refunded" }],
    ["customers-status-2", "customers", { status: "pending,expired" }],
    ["customers-email", "customers", { email: newest.email.toUpperCase() }],
    ["invoices-status-refunded", "invoices", { status: "refunded" }],
    ["invoices-status-2", "invoices", { status: "pending,expired" }],
  );
}
if (args["popular-variant"]) {
  const best = buildPools(BENCH_SEED).variants.values[0]!.id;
  cases.push(["customers-id-best-seller", "customers", { id: best }], ["invoices-id-best-seller", "invoices", { id: best }]);
}

const runs = Number(args.runs);
process.stdout.write(`${customers.toLocaleString("en-US")} customers; cache_size ${String(handle.pragma("cache_size", { simple: true }))}, mmap_size ${String(handle.pragma("mmap_size", { simple: true }))}\n`);
for (const [name, list, query] of cases) {
  const q = parseListQuery({ limit: 100, ...query }, INVOICE_STATUSES);
  // What a reader thread does for the route: the page's documents, joined (not parsed).
  const call = () => repos[list].listPage(dataset.storeId, q).then((page) => pageJson(list, page, q.limit, encodeCursor));
  const slow = name.includes("best-seller");
  const n = slow ? 3 : runs;
  await call(); // warm the caches
  statements.length = 0;
  const started = performance.now();
  for (let i = 0; i < n; i++) await call();
  const total = (performance.now() - started) / n;
  const inSql = statements.reduce((sum, s) => sum + s.ms, 0) / n;
  process.stdout.write(`${name.padEnd(26)} ${total.toFixed(2).padStart(8)} ms per page, ${inSql.toFixed(2).padStart(8)} ms in SQL\n`);
  if (!args.plans) continue;
  const perStatement = statements.length / n;
  for (const s of statements.slice(0, perStatement)) {
    const avg = statements.filter((x) => x.sql === s.sql).reduce((sum, x) => sum + x.ms, 0) / n;
    process.stdout.write(`    ${avg.toFixed(2).padStart(8)} ms  ${s.sql.replace(/(\?, ){3,}\?/g, "?, …").slice(0, 150)}\n`);
    const plan = handle.prepare(`explain query plan ${s.sql}`).all(...(s.parameters as unknown[])) as { detail: string }[];
    for (const row of plan) process.stdout.write(`                 ${row.detail}\n`);
  }
}
