// The isolation benchmark's server process: the real app (buildApp, reader threads, the sandbox pool) on a
// store seeded with N customers (seed 7) and the catalogue's generic-hmac plugin, on SQLite or PostgreSQL.
// The database is seeded once and kept under bench/data/ (SQLite) or in its own PostgreSQL database.
//   (forked by run.ts) node bench/isolation/server.ts --dialect sqlite|postgres --customers 20000
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { openDatabase } from "../../src/platform/db/database.ts";
import { seedStore } from "../../src/seed/seed.ts";
import { createServices } from "../../src/services.ts";
import { type IsolationServerReady, SIGNING_SECRET } from "./protocol.ts";

const { values: args } = parseArgs({
  options: { dialect: { type: "string", default: "sqlite" }, customers: { type: "string", default: "20000" }, "read-threads": { type: "string" }, "read-threads-nice": { type: "string" } },
});
const customers = Number(args.customers);
const DATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../data");
const PG_ADMIN = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** The seeded database's URL and its store, seeding it first when absent. */
async function dataset(): Promise<{ url: string; storeId: string }> {
  mkdirSync(DATA_DIR, { recursive: true });
  const manifest = path.join(DATA_DIR, `isolation-${args.dialect}-${customers}.json`);
  let url: string;
  let seedUrl: string;
  if (args.dialect === "postgres") {
    const u = new URL(PG_ADMIN);
    u.pathname = `/bench_isolation_${customers}`;
    url = seedUrl = u.toString();
  } else {
    url = `sqlite:${path.join(DATA_DIR, `isolation-${customers}.db`)}`;
    seedUrl = url.replace(/\.db$/, ".partial.db");
  }
  if (existsSync(manifest)) return { url, storeId: (JSON.parse(readFileSync(manifest, "utf8")) as { storeId: string }).storeId };
  if (args.dialect === "postgres") {
    const admin = new pg.Client({ connectionString: PG_ADMIN });
    await admin.connect();
    await admin.query(`drop database if exists bench_isolation_${customers}`);
    await admin.query(`create database bench_isolation_${customers}`);
    await admin.end();
  } else {
    for (const f of ["", "-wal", "-shm"]) rmSync(seedUrl.slice("sqlite:".length) + f, { force: true });
  }
  const db = openDatabase(loadConfig({ DATABASE_URL: seedUrl }).database);
  await db.migrate();
  const result = await seedStore(db, { customers, seed: 7, until: Date.parse("2026-01-01T00:00:00.000Z"), storeName: "Isolation benchmark" });
  await db.close();
  if (args.dialect === "sqlite") renameSync(seedUrl.slice("sqlite:".length), url.slice("sqlite:".length));
  writeFileSync(manifest, JSON.stringify({ storeId: result.storeId }) + "\n");
  return { url, storeId: result.storeId };
}

const { url, storeId } = await dataset();
const config = loadConfig({
  DATABASE_URL: url,
  // Fixed, so the plugin installed on an earlier run still opens (a benchmark's key, not a secret).
  SECRETS_KEY: createHash("sha256").update("storefront isolation benchmark").digest("hex"),
  LOG_LEVEL: "silent",
  WEBHOOK_RATE_LIMIT_MAX: "1000000000",
  RATE_LIMIT_MAX: "1000000000",
  ...(args["read-threads"] === undefined ? {} : { READ_THREADS: args["read-threads"] }),
  ...(args["read-threads-nice"] === undefined ? {} : { READ_THREADS_NICE: args["read-threads-nice"] }),
});
const services = await createServices(config, { warmSandbox: true });
await services.plugins.install(storeId, "generic-hmac", { catalog: "generic-hmac", secrets: { signingSecret: SIGNING_SECRET } });
const { key } = await services.stores.createKey(storeId, { name: "isolation bench" });
const app = await buildApp(services, { logger: false });
await app.listen({ port: 0, host: "127.0.0.1" });
const address = app.server.address();
const ready: IsolationServerReady = { port: typeof address === "object" && address ? address.port : 0, storeId, key, readThreads: services.reads.threads };
process.send!(ready);
process.on("disconnect", () => {
  void app.close().then(() => services.close()).then(() => process.exit(0));
});
