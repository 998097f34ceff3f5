// The machine's own limit: how many durable commits per second its disk takes, so that payments per second
// can be read against it. SQLite: single-row transactions with synchronous = FULL in WAL mode (the payment
// commit's setting), from one connection (SQLite has one writer). PostgreSQL: single-row inserts with
// synchronous_commit = on, from 1 and from 32 clients (commits from many clients share WAL flushes).
// Called by run.ts at the start of a run, or on its own:
//   node bench/webhook/disk.ts [--seconds 3]
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import pg from "pg";
import { PG } from "../lib/bench-database.ts";

export interface DiskRates {
  seconds: number;
  /** SQLite single-row transactions per second, WAL, synchronous = FULL (null: not measured). */
  sqliteFull: number | null;
  /** PostgreSQL single-row inserts per second, synchronous_commit = on, from 1 and from 32 clients. */
  postgres1: number | null;
  postgres32: number | null;
}

export function sqliteCommitRate(seconds: number): number {
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-disk-"));
  try {
    const db = new Database(path.join(dir, "disk.db"));
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("create table t (id integer primary key, v text not null)");
    const insert = db.prepare("insert into t (v) values (?)");
    const value = "x".repeat(200);
    let n = 0;
    const end = performance.now() + seconds * 1000;
    const started = performance.now();
    while (performance.now() < end) {
      insert.run(value); // autocommit: one transaction, one WAL sync
      n++;
    }
    const rate = n / ((performance.now() - started) / 1000);
    db.close();
    return Math.round(rate);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function postgresInsertRate(clients: number, seconds: number): Promise<number> {
  const schema = `bench_disk_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: PG });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.query(`create table ${schema}.t (id bigserial primary key, v text not null)`);
  const connections = await Promise.all(
    Array.from({ length: clients }, async () => {
      const c = new pg.Client({ connectionString: PG });
      await c.connect();
      await c.query("set synchronous_commit = on");
      return c;
    }),
  );
  try {
    const value = "x".repeat(200);
    const started = performance.now();
    const end = started + seconds * 1000;
    const counts = await Promise.all(
      connections.map(async (c) => {
        let n = 0;
        while (performance.now() < end) {
          await c.query({ name: "disk_insert", text: `insert into ${schema}.t (v) values ($1)`, values: [value] });
          n++;
        }
        return n;
      }),
    );
    return Math.round(counts.reduce((a, b) => a + b, 0) / ((performance.now() - started) / 1000));
  } finally {
    await Promise.all(connections.map((c) => c.end()));
    await admin.query(`drop schema ${schema} cascade`);
    await admin.end();
  }
}

export async function measureDisk(seconds: number, dialects: string[]): Promise<DiskRates> {
  const rates: DiskRates = { seconds, sqliteFull: null, postgres1: null, postgres32: null };
  if (dialects.includes("sqlite")) rates.sqliteFull = sqliteCommitRate(seconds);
  if (dialects.includes("postgres")) {
    rates.postgres1 = await postgresInsertRate(1, seconds);
    rates.postgres32 = await postgresInsertRate(32, seconds);
  }
  return rates;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { seconds: { type: "string", default: "3" }, dialects: { type: "string", default: "sqlite,postgres" } } });
  console.log(JSON.stringify(await measureDisk(Number(values.seconds), values.dialects.split(",")), null, 2));
}
