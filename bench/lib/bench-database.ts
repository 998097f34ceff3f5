// A fresh database for one benchmark server: an SQLite file in a temporary folder, or a schema of its own
// in the local PostgreSQL `test` database; `drop` removes it when the server is told to stop.
// On PostgreSQL the schema's name is also the connections' application_name, so a runner can find this
// server's backends in pg_stat_activity (and their CPU in /proc).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";

/** The local PostgreSQL (`BENCH_PG_URL`: another, such as its Unix socket, `postgres://postgres@localhost/test?host=/var/run/postgresql`). */
export const PG = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface BenchDatabase {
  url: string;
  dialect: "sqlite" | "postgres";
  /** SQLite: the database file. */
  file: string | null;
  /** PostgreSQL: the schema (and application_name) of this database. */
  schema: string | null;
  drop(): Promise<void>;
}

export async function benchDatabase(dialect: string, label: string): Promise<BenchDatabase> {
  if (dialect !== "postgres") {
    const dir = mkdtempSync(path.join(os.tmpdir(), `bench-${label}-`));
    const file = path.join(dir, "bench.db");
    return { url: `sqlite:${file}`, dialect: "sqlite", file, schema: null, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `bench_${label}_${randomBytes(4).toString("hex")}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: PG });
    await client.connect();
    await client.query(statement);
    await client.end();
  };
  await run(`create schema ${schema}`);
  return {
    url: `${PG}${PG.includes("?") ? "&" : "?"}options=-c%20search_path%3D${schema}&application_name=${schema}`,
    dialect: "postgres",
    file: null,
    schema,
    drop: () => run(`drop schema ${schema} cascade`),
  };
}
