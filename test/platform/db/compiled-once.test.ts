// Queries compiled once (src/platform/db/compiled-once.ts): built by Kysely once per database, each run bound
// with its own values, on both dialects; a builder that puts a value of its own into the query is refused.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { compiledOnce, paramRow } from "../../../src/platform/db/compiled-once.ts";
import { type Db, openDatabase } from "../../../src/platform/db/database.ts";
import { DIALECTS, freshDatabase } from "../../helpers/harness.ts";

for (const dialect of DIALECTS) {
  describe(`queries compiled once on ${dialect.name}`, { skip: dialect.skip }, () => {
    let db: Db;
    let drop: () => Promise<void>;
    before(async () => {
      const fresh = await freshDatabase(dialect.name);
      drop = fresh.drop;
      db = openDatabase(fresh.url.startsWith("sqlite:") ? { kind: "sqlite", file: fresh.url.slice("sqlite:".length) } : { kind: "postgres", url: fresh.url });
      await db.migrate();
    });
    after(async () => {
      await db?.close();
      await drop?.();
    });

    test("the builder runs once per database; every run writes and reads its own values, in and out of transactions", async () => {
      let builds = 0;
      const insert = compiledOnce<{ id: string; name: string; created_at: number }>("store insert", (k, param) => {
        builds++;
        return k.insertInto("stores").values(paramRow(param, { id: true, name: true, created_at: true }));
      });
      const byName = compiledOnce<{ name: string; since: number }, { id: string }>("stores by name", (k, param) =>
        k.selectFrom("stores").select("id").where("name", "=", param((i) => i.name)).where("created_at", ">=", param((i) => i.since)).orderBy("id"),
      );
      await insert(db.kysely, { id: "st_1", name: "one", created_at: 10 });
      await db.kysely.transaction().execute(async (tx) => {
        await insert(tx, { id: "st_2", name: "two", created_at: 20 });
        await insert(tx, { id: "st_3", name: "two", created_at: 30 });
      });
      assert.equal(builds, 1);
      assert.deepEqual((await byName(db.kysely, { name: "two", since: 0 })).rows, [{ id: "st_2" }, { id: "st_3" }]);
      assert.deepEqual((await byName(db.kysely, { name: "two", since: 25 })).rows, [{ id: "st_3" }]);
      assert.deepEqual((await byName(db.kysely, { name: "one", since: 0 })).rows, [{ id: "st_1" }]);
      const updated = await compiledOnce<{ id: string; name: string }>("store rename", (k, param) => k.updateTable("stores").set({ name: param((i) => i.name) }).where("id", "=", param((i) => i.id)))(db.kysely, {
        id: "st_1",
        name: "renamed",
      });
      assert.equal(updated.numAffectedRows, 1n);
    });

    test("a builder that puts a value of its own into the query is refused, not run with it again and again", async () => {
      const captured = "st_1";
      const bad = compiledOnce<{ name: string }>("bad", (k, param) => k.selectFrom("stores").select("id").where("id", "=", captured).where("name", "=", param((i) => i.name)));
      await assert.rejects(async () => bad(db.kysely, { name: "x" }), /query bad: a parameter that is not a placeholder \(st_1\)/);
    });
  });
}

// SQLite: in a transaction, a compiled-once statement runs on the connection at once (a kept better-sqlite3
// statement), not through Kysely's executor; outside one it still waits its turn through Kysely, since the
// one connection may be in another's transaction. What it does is what Kysely would do: these tests hold for
// both ways, and the second fails for a direct run outside a transaction (it would join the one in progress).
describe("queries compiled once on SQLite, run directly in transactions", () => {
  let db: Db;
  let drop: () => Promise<void>;
  let seen: string[] = [];
  before(async () => {
    const fresh = await freshDatabase("sqlite");
    drop = fresh.drop;
    db = openDatabase({ kind: "sqlite", file: fresh.url.slice("sqlite:".length) }, { onQuery: (text) => seen.push(text) });
    await db.migrate();
  });
  after(async () => {
    await db?.close();
    await drop?.();
  });
  const insert = compiledOnce<{ id: string; name: string; created_at: number }>("store insert, direct", (k, param) => k.insertInto("stores").values(paramRow(param, { id: true, name: true, created_at: true })));
  const names = async () => (await db.kysely.selectFrom("stores").select("name").orderBy("name").execute()).map((r) => r.name);

  test("in a transaction the statement is written in it, told to the statement hook, and undone with it", async () => {
    await db.kysely
      .transaction()
      .execute(async (tx) => {
        seen = [];
        assert.equal((await insert(tx, { id: "st_d1", name: "direct", created_at: 1 })).numAffectedRows, 1n);
        assert.equal((db.sqlite!.prepare("select count(*) as n from stores where id = 'st_d1'").get() as { n: number }).n, 1);
        assert.deepEqual(seen, [`insert into "stores" ("id", "name", "created_at") values (?, ?, ?)`]);
        throw new Error("roll back");
      })
      .catch(() => {});
    assert.deepEqual(await names(), []);
  });

  test("outside a transaction it waits for the one in progress instead of running inside it", async () => {
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    let opened = () => {};
    const open = new Promise<void>((r) => (opened = r));
    const transaction = db.kysely
      .transaction()
      .execute(async (tx) => {
        await insert(tx, { id: "st_in", name: "inside", created_at: 1 });
        opened();
        await held;
        throw new Error("roll back");
      })
      .catch(() => "rolled back");
    await open;
    // Sent while the transaction holds the connection: it must not become part of it.
    const outside = insert(db.kysely, { id: "st_out", name: "outside", created_at: 2 });
    release();
    assert.equal(await transaction, "rolled back");
    await outside;
    assert.deepEqual(await names(), ["outside"]);
  });

  test("a direct run that fails rejects its promise, and the transaction can go on", async () => {
    await db.kysely.transaction().execute(async (tx) => {
      await insert(tx, { id: "st_twice", name: "first", created_at: 1 });
      await assert.rejects(insert(tx, { id: "st_twice", name: "second", created_at: 2 }), /UNIQUE constraint failed/);
      await insert(tx, { id: "st_after", name: "after", created_at: 3 });
    });
    assert.deepEqual(await names(), ["after", "first", "outside"]);
  });
});
