// Durable commits (src/platform/db/durable.ts): on SQLite, payments that arrive together share one transaction and
// one sync of the write-ahead log, each in a savepoint of its own, so one that fails rolls back alone.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { openDatabase } from "../../../src/platform/db/database.ts";
import { createDurableCommitter } from "../../../src/platform/db/durable.ts";

describe("SQLite durable commits", () => {
  test("works queued together share one transaction; the one that fails is rolled back alone, the others commit", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-durable-"));
    const file = path.join(dir, "d.db");
    const statements: string[] = [];
    const db = openDatabase({ kind: "sqlite", file }, { onQuery: (s) => statements.push(s) });
    try {
      await db.migrate();
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      const store = (id: string) => committer.run((tx) => tx.insertInto("stores").values({ id, name: id, created_at: 1 }).execute());
      statements.length = 0;
      const outcomes = await Promise.allSettled([
        store("st_a"),
        committer.run(async (tx) => {
          await tx.insertInto("stores").values({ id: "st_b", name: "b", created_at: 1 }).execute();
          throw new Error("this payment fails after writing");
        }),
        store("st_c"),
      ]);
      assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"]);
      const ids = (await db.kysely.selectFrom("stores").select("id").orderBy("id").execute()).map((r) => r.id);
      assert.deepEqual(ids, ["st_a", "st_c"]);
      assert.equal(statements.filter((s) => s === "begin").length, 1, "one transaction for the three");
      assert.equal(statements.filter((s) => s === "commit").length, 1);
      assert.equal(statements.filter((s) => s.startsWith("rollback to")).length, 1);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a work alone runs in a transaction of its own, without savepoints", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-durable-"));
    const file = path.join(dir, "d.db");
    const statements: string[] = [];
    const db = openDatabase({ kind: "sqlite", file }, { onQuery: (s) => statements.push(s) });
    try {
      await db.migrate();
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      statements.length = 0;
      await committer.run((tx) => tx.insertInto("stores").values({ id: "st_x", name: "x", created_at: 1 }).execute());
      assert.deepEqual(statements.map((s) => s.split(" ")[0]), ["begin", "insert", "commit"]);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
