// The PostgreSQL pool's life. It keeps the connections it opened through a lull. Each new connection is a new server
// process with empty caches that plans every statement of the money path again: a pool that closed its idle
// connections made the first payments after every pause, and the reads beside them, wait on that work. Idle,
// they do not keep a process alive; closed, they are ended however they were used.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, mock, test } from "node:test";
import { sql } from "kysely";
import pg from "pg";
import { type Db, openDatabase } from "../../../src/platform/db/database.ts";
import { freshDatabase, PG_ADMIN_URL, pgSkip } from "../../helpers/harness.ts";

/** The server processes that answer three statements run at once (three of the pool's connections). */
async function serverProcesses(db: Db): Promise<Set<number>> {
  const one = () => sql<{ pid: number }>`select pg_backend_pid() as pid from pg_sleep(0.05)`.execute(db.kysely);
  const results = await Promise.all([one(), one(), one()]);
  return new Set(results.map((r) => r.rows[0]!.pid));
}

describe("the PostgreSQL pool through a lull", { skip: pgSkip }, () => {
  test("the connections opened under load answer again after fifteen idle minutes: none was closed and reopened", async () => {
    const fresh = await freshDatabase("postgres");
    const db = openDatabase({ kind: "postgres", url: fresh.url });
    // The pool's idle timers are set as it takes its connections back: faked from the start, the lull is a tick.
    mock.timers.enable({ apis: ["setTimeout"] });
    try {
      const underLoad = await serverProcesses(db);
      assert.equal(underLoad.size, 3, "three statements at once ran on three connections");
      mock.timers.tick(15 * 60_000);
      assert.deepEqual(await serverProcesses(db), underLoad);
    } finally {
      mock.timers.reset();
      await db.close();
      await fresh.drop();
    }
  });

  test("idle connections do not keep a process alive: a command that never closes its database still ends", async () => {
    const fresh = await freshDatabase("postgres");
    try {
      const database = new URL("../../../src/platform/db/database.ts", import.meta.url).href;
      const script = `import { openDatabase } from ${JSON.stringify(database)};
        const db = openDatabase({ kind: "postgres", url: process.env.URL });
        await db.ping();
        console.log("pinged");`;
      // Killed after 20 s: a process held open by its idle connections would wait forever.
      const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, URL: fresh.url }, encoding: "utf8", timeout: 20_000 });
      assert.equal(run.signal, null, "the process ended on its own");
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout.trim(), "pinged");
    } finally {
      await fresh.drop();
    }
  });
});

describe("closing a PostgreSQL database", { skip: pgSkip }, () => {
  test("ends its pool's connections also when every statement went to the pool directly, none through Kysely", async () => {
    const fresh = await freshDatabase("postgres");
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    try {
      const db = openDatabase({ kind: "postgres", url: fresh.url });
      const pid = ((await db.pgPool!.query("select pg_backend_pid() as pid")).rows[0] as { pid: number }).pid;
      await db.close();
      const alive = async () => (await admin.query("select count(*)::int as n from pg_stat_activity where pid = $1", [pid])).rows[0].n as number;
      // The server process leaves a moment after its connection closes.
      for (let i = 0; i < 50 && (await alive()) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 40));
      assert.equal(await alive(), 0, "the connection's server process is gone");
    } finally {
      await admin.end();
      await fresh.drop();
    }
  });
});
