// The reader threads' postgres.js connection (database.ts, postgresJsPrepared) pipelines: the next page's
// query is sent while the last one's rows arrive. postgres.js 3.4 counts a result's rows per connection and
// resets the count only when a statement completes: a statement that fails part way through its rows (a
// connection terminated by a failover, a statement timeout, an error on one row) leaves the count where it
// was, and the next statement's rows land after that many empty slots (upstream: porsager/postgres#1119,
// #1181). A page read then met the holes: `Iterator value undefined is not an entry object`, a 500 under
// database faults. The rows of every statement are read without holes, in order, all of them.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { loadConfig } from "../../../src/config.ts";
import { openDatabase } from "../../../src/platform/db/database.ts";
import { freshDatabase, pgSkip } from "../../helpers/harness.ts";

test("after a statement that failed part way through its rows, the next one's rows are all there, in order, without holes", { skip: pgSkip }, async () => {
  const database = await freshDatabase("postgres");
  const db = openDatabase(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }).database, { poolSize: 1, bytes: true });
  try {
    // Three rows stream, then the fourth divides by zero; the second statement is sent behind it.
    const failing = db.prepared.all({ name: null, sql: "select i, 1 / (4 - i) as boom from generate_series(1, 10) as i" }, []).then(
      () => "no error",
      (err: Error) => err.message,
    );
    const next = db.prepared.all<{ x: number }>({ name: null, sql: "select x from generate_series(1, 5) as x" }, []);
    assert.match(await failing, /division by zero/);
    const rows = await next;
    assert.equal(rows.length, 5, `five rows, no empty slots before them: ${JSON.stringify(rows)}`);
    assert.deepEqual(
      rows.map((r) => r.x),
      [1, 2, 3, 4, 5],
    );
    // And the connection goes on as before.
    const after = await db.prepared.all<{ x: number }>({ name: null, sql: "select x from generate_series(1, 2) as x" }, []);
    assert.deepEqual(
      after.map((r) => r.x),
      [1, 2],
    );
  } finally {
    await db.close();
    await database.drop();
  }
});
