// The SQLite statement cache under Kysely: a statement is prepared once per SQL text, a statement still
// being iterated is never handed out twice, and the cache stays within its size.
import assert from "node:assert/strict";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import { withStatementCache } from "../../../src/platform/db/statement-cache.ts";

function database() {
  const handle = new SQLite(":memory:");
  handle.exec("create table t (n integer)");
  handle.prepare("insert into t (n) values (1), (2), (3)").run();
  return handle;
}

test("the same SQL text gets the same prepared statement, with the same results", () => {
  const db = withStatementCache(database());
  const a = db.prepare("select n from t order by n");
  const b = db.prepare("select n from t order by n");
  assert.equal(a, b);
  assert.deepEqual(b.all([]), [{ n: 1 }, { n: 2 }, { n: 3 }]);
  assert.deepEqual(a.all([]), [{ n: 1 }, { n: 2 }, { n: 3 }]);
});

test("a statement still being iterated is not handed out again", () => {
  const db = withStatementCache(database());
  const sql = "select n from t order by n";
  const outer = db.prepare(sql);
  const seen: number[][] = [];
  for (const row of outer.iterate([]) as Iterable<{ n: number }>) {
    const inner = db.prepare(sql);
    assert.notEqual(inner, outer, "a busy statement is not reused");
    seen.push((inner.all([]) as { n: number }[]).map((r) => r.n).concat(row.n));
  }
  assert.deepEqual(seen, [[1, 2, 3, 1], [1, 2, 3, 2], [1, 2, 3, 3]]);
});

test("the least recently used statement leaves a full cache", () => {
  const db = withStatementCache(database(), 2);
  const first = db.prepare("select 1");
  const second = db.prepare("select 2");
  assert.equal(db.prepare("select 1"), first, "used again: now the most recent");
  db.prepare("select 3"); // evicts "select 2"
  assert.equal(db.prepare("select 1"), first);
  assert.notEqual(db.prepare("select 2"), second);
});
