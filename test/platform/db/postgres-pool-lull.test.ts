// A PostgreSQL pool keeps the connections it opened through a lull. Each new connection is a new server
// process with empty caches that plans every statement of the money path again: a pool that closed its idle
// connections made the first payments after every pause, and the reads beside them, wait on that work.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, mock, test } from "node:test";
import { pathToFileURL } from "node:url";
import { sql } from "kysely";
import { type Db, openDatabase } from "../../../src/platform/db/database.ts";
import { freshDatabase, pgSkip } from "../../helpers/harness.ts";

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
      const database = pathToFileURL(new URL("../../../src/platform/db/database.ts", import.meta.url).pathname).href;
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
