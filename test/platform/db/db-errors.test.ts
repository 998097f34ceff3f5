// Which database errors are "unavailable" (answered 503 database_unavailable and retried, never 500):
// each produced for real on PostgreSQL and SQLite, not written by hand.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import SQLite from "better-sqlite3";
import pg from "pg";
import { isDatabaseUnavailable } from "../../../src/platform/db/db-errors.ts";
import { PG_ADMIN_URL, pgSkip } from "../../helpers/harness.ts";

const failure = async (work: () => Promise<unknown>): Promise<unknown> => {
  try {
    await work();
  } catch (err) {
    return err;
  }
  throw new Error("expected the work to fail");
};

const thrown = (work: () => unknown): unknown => {
  try {
    work();
  } catch (err) {
    return err;
  }
  throw new Error("expected the work to throw");
};

describe("database errors on PostgreSQL", { skip: pgSkip }, () => {
  test("a client whose connection was closed (a pool's client after a fault) is unavailable, not a bug", async () => {
    const client = new pg.Client({ connectionString: PG_ADMIN_URL });
    await client.connect();
    await client.end();
    const err = await failure(() => client.query("select 1"));
    assert.match(String((err as Error).message), /not queryable/);
    assert.equal(isDatabaseUnavailable(err), true);
  });

  test("a connection its server terminated is unavailable, in the statement it cut and after it", async () => {
    const client = new pg.Client({ connectionString: PG_ADMIN_URL });
    client.on("error", () => {});
    await client.connect();
    const killer = new pg.Client({ connectionString: PG_ADMIN_URL });
    await killer.connect();
    try {
      const pid = (await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
      const cut = failure(() => client.query("select pg_sleep(5)"));
      await new Promise((r) => setTimeout(r, 100));
      await killer.query("select pg_terminate_backend($1)", [pid]);
      assert.equal(isDatabaseUnavailable(await cut), true);
      assert.equal(isDatabaseUnavailable(await failure(() => client.query("select 1"))), true);
    } finally {
      await killer.end();
      await client.end().catch(() => {});
    }
  });

  test("an error of the statement itself (bad SQL) is not unavailability", async () => {
    const client = new pg.Client({ connectionString: PG_ADMIN_URL });
    await client.connect();
    try {
      assert.equal(isDatabaseUnavailable(await failure(() => client.query("select * from no_such_table_here"))), false);
    } finally {
      await client.end();
    }
  });
});

describe("database errors on SQLite", () => {
  test("busy past the timeout is unavailable; a constraint is not", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-dberr-"));
    const a = new SQLite(path.join(dir, "d.db"));
    const b = new SQLite(path.join(dir, "d.db"));
    try {
      a.exec("create table t (id integer primary key)");
      b.pragma("busy_timeout = 0");
      a.exec("begin immediate");
      assert.equal(isDatabaseUnavailable(thrown(() => b.exec("begin immediate"))), true);
      a.exec("insert into t values (1)");
      a.exec("commit");
      assert.equal(isDatabaseUnavailable(thrown(() => a.exec("insert into t values (1)"))), false);
    } finally {
      a.close();
      b.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
