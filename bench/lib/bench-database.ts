// A fresh database for one benchmark server: an SQLite file in a temporary folder, or a schema of its own
// in the local PostgreSQL `test` database; `drop` removes it when the server is told to stop.
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";

const PG = "postgres://postgres@127.0.0.1:5432/test";

export async function benchDatabase(dialect: string, label: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (dialect !== "postgres") return { url: `sqlite:${path.join(mkdtempSync(path.join(os.tmpdir(), `bench-${label}-`)), "bench.db")}`, drop: async () => {} };
  const schema = `bench_${label}_${randomBytes(4).toString("hex")}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: PG });
    await client.connect();
    await client.query(statement);
    await client.end();
  };
  await run(`create schema ${schema}`);
  return { url: `${PG}?options=-c%20search_path%3D${schema}`, drop: () => run(`drop schema ${schema} cascade`) };
}
