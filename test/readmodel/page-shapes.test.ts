// A list page's key query is built once per shape and only bound per request (src/readmodel/page-shapes.ts):
// the same SQL text for every request of a shape, each request's own values at the right positions, and
// no value of one request left in the SQL of the next.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import SQLite from "better-sqlite3";
import { type Compilable, Kysely, SqliteDialect, sql } from "kysely";
import { openDatabase } from "../../src/platform/db/database.ts";
import type { Database } from "../../src/platform/db/schema.ts";
import { type ListQuery, parseListQuery } from "../../src/lib/list-query.ts";
import { MAX_SHAPES, pageShapes, shapeOf } from "../../src/readmodel/page-shapes.ts";
import { concatPieces, mergeKeys, pageFetch, windowConditions, writePieces } from "../../src/readmodel/paging.ts";
import { freshDatabase, pgSkip } from "../helpers/harness.ts";
import { INVOICE_STATUSES } from "../../src/schemas/invoice-statuses.ts";

const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });

/** Shapes of one statement each, and that statement bound. */
function oneStatement(build: (storeId: string, q: ListQuery) => Compilable<unknown>, name = "t") {
  const shapes = pageShapes(name, (storeId, q) => [build(storeId, q)]);
  return (storeId: string, q: ListQuery) => shapes(storeId, q)[0]!;
}

describe("page query shapes", () => {
  test("requests of one shape share one compiled statement, each bound with its own values", () => {
    let builds = 0;
    const keysOf = oneStatement((storeId, q) => {
      builds++;
      let ids = db.selectFrom("customers as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId);
      for (const cond of windowConditions("p", q)) ids = ids.where(cond);
      return ids.orderBy("p.created_at", "desc").limit(pageFetch(q.limit));
    });
    const a = keysOf("st_a", parseListQuery({ limit: 3, createdAtFrom: "2024-01-01" }, INVOICE_STATUSES));
    const b = keysOf("st_b", parseListQuery({ limit: 3, createdAtFrom: "2025-06-01" }, INVOICE_STATUSES));
    assert.equal(builds, 1, "built once for the shape");
    assert.deepEqual(a.statement, b.statement);
    assert.match(a.statement.sql, /limit 4$/, "the page size is part of the text");
    assert.deepEqual(a.params, ["st_a", Date.parse("2024-01-01T00:00:00Z")]);
    assert.deepEqual(b.params, ["st_b", Date.parse("2025-06-01T00:00:00Z")]);

    // What Kysely makes of the request itself is the same text and the same values.
    const q = parseListQuery({ limit: 3, createdAtFrom: "2025-06-01" }, INVOICE_STATUSES);
    let direct = db.selectFrom("customers as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", "st_b");
    for (const cond of windowConditions("p", q)) direct = direct.where(cond);
    const compiled = direct.orderBy("p.created_at", "desc").limit(pageFetch(q.limit)).compile();
    assert.equal(b.statement.sql, compiled.sql);
    assert.deepEqual(b.params, compiled.parameters);
  });

  test("another shape (a filter added, another number of statuses) is another statement", () => {
    const keysOf = oneStatement((storeId, q) => {
      let ids = db.selectFrom("invoices as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId);
      if (q.statuses !== null) ids = ids.where("p.status", "in", q.statuses);
      if (q.after !== null) ids = ids.where(sql<boolean>`(p.created_at, p.id) < (${q.after.createdAt}, ${q.after.id})`);
      return ids.limit(pageFetch(q.limit));
    });
    const one = keysOf("st", parseListQuery({ status: "completed" }, INVOICE_STATUSES));
    const two = keysOf("st", parseListQuery({ status: "completed,refunded" }, INVOICE_STATUSES));
    const twoOther = keysOf("st", parseListQuery({ status: "pending,expired" }, INVOICE_STATUSES));
    assert.notEqual(one.statement.name, two.statement.name);
    assert.equal(two.statement.name, twoOther.statement.name);
    assert.deepEqual(twoOther.params, ["st", "pending", "expired"]);
    assert.notEqual(keysOf("st", parseListQuery({ status: "completed", limit: 10 }, INVOICE_STATUSES)).statement.name, one.statement.name, "another page size");
    assert.notEqual(shapeOf(parseListQuery({}, INVOICE_STATUSES)), shapeOf(parseListQuery({ id: "x" }, INVOICE_STATUSES)));
  });

  test(`at most ${MAX_SHAPES} shapes are kept; a client trying every page size gets statements prepared for one run`, () => {
    let builds = 0;
    const keysOf = oneStatement((storeId, q) => {
      builds++;
      return db.selectFrom("customers").select("id").where("store_id", "=", storeId).limit(pageFetch(q.limit));
    });
    for (let limit = 1; limit <= MAX_SHAPES; limit++) assert.notEqual(keysOf("st", parseListQuery({ limit }, INVOICE_STATUSES)).statement.name, null);
    const beyond = keysOf("st", parseListQuery({ limit: MAX_SHAPES + 1 }, INVOICE_STATUSES));
    assert.equal(beyond.statement.name, null, "not kept: no prepared statement left behind on the server");
    assert.match(beyond.statement.sql, new RegExp(`limit ${MAX_SHAPES + 2}$`));
    keysOf("st", parseListQuery({ limit: MAX_SHAPES + 1 }, INVOICE_STATUSES));
    assert.equal(builds, MAX_SHAPES + 2, "built again for each request");
    const kept = keysOf("st", parseListQuery({ limit: 1 }, INVOICE_STATUSES));
    assert.notEqual(kept.statement.name, null);
    assert.equal(builds, MAX_SHAPES + 2, "a kept shape is not built again");
  });

  test("a shape of several statements (ranges merged in page order) binds each with its own values", () => {
    const shapes = pageShapes("t", (storeId, q) => [
      db.selectFrom("customers").select("id").where("store_id", "=", storeId).limit(pageFetch(q.limit)),
      db.selectFrom("reviews").select("id").where("store_id", "=", storeId).where("product_id", "=", q.id!).limit(pageFetch(q.limit)),
    ]);
    const [a, b] = shapes("st", parseListQuery({ id: "prod_1", limit: 5 }, INVOICE_STATUSES));
    assert.deepEqual(a!.params, ["st"]);
    assert.deepEqual(b!.params, ["st", "prod_1"]);
    assert.notEqual(a!.statement.name, b!.statement.name);
  });

  test("ranges merge newest first, ties by id, an element found twice kept once, cut at limit + 1", () => {
    const k = (id: string, created_at: number) => ({ id, created_at });
    const merged = mergeKeys([[k("c", 30), k("a", 10)], [k("d", 30), k("c", 30), k("b", 20)], []], 3);
    assert.deepEqual(merged, [k("d", 30), k("c", 30), k("b", 20), k("a", 10)]);
    assert.deepEqual(mergeKeys([[k("c", 30), k("a", 10)], [k("d", 30), k("b", 20)]], 1), [k("d", 30), k("c", 30)]);
  });

  test("a builder that puts a value of its own into the SQL is refused, not cached for every later request", () => {
    const captured = "st_first";
    const keysOf = oneStatement((_storeId, q) => db.selectFrom("customers").select("id").where("store_id", "=", captured).limit(pageFetch(q.limit)));
    assert.throws(() => keysOf("st_second", parseListQuery({}, INVOICE_STATUSES)), /not a placeholder \(st_first\)/);
  });

  test("one SQL text is one statement name, whichever list compiled it first", () => {
    const build = (storeId: string, q: ReturnType<typeof parseListQuery>) => db.selectFrom("customers").select("id").where("store_id", "=", storeId).limit(pageFetch(q.limit));
    const first = oneStatement(build, "k")("a", parseListQuery({ createdAtTo: "2024-01-01" }, INVOICE_STATUSES));
    const again = oneStatement(build, "k");
    again("a", parseListQuery({ id: "x" }, INVOICE_STATUSES)); // another shape compiled first in this instance
    assert.equal(again("a", parseListQuery({ createdAtTo: "2024-01-01" }, INVOICE_STATUSES)).statement.name, first.statement.name);
  });
});

describe("page statements on PostgreSQL", { skip: pgSkip }, () => {
  test("a reader's connections plan prepared statements once (generic plans); other connections are left as they were", async () => {
    const { url, drop } = await freshDatabase("postgres");
    const withOption = new URL(url);
    withOption.searchParams.set("options", "-c statement_timeout=12345");
    const reader = openDatabase({ kind: "postgres", url: withOption.toString() }, { poolSize: 1, genericPlans: true });
    const plain = openDatabase({ kind: "postgres", url }, { poolSize: 1 });
    try {
      const show = async (db: typeof reader, setting: string) => ((await db.pgPool!.query(`show ${setting}`)).rows[0] as Record<string, string>)[setting];
      assert.equal(await show(reader, "plan_cache_mode"), "force_generic_plan");
      assert.equal(await show(reader, "statement_timeout"), "12345ms", "the URL's own startup options are kept");
      assert.equal(await show(plain, "plan_cache_mode"), "auto");
    } finally {
      await reader.close();
      await plain.close();
      await drop();
    }
  });
});

describe("page pieces written where the page is sent from", () => {
  const pieces = ['{"data":[', Buffer.from('{"name":"Zoë"}'), ",", '{"name":"日本 🎉"}', "]}"];

  test("text and bytes are written as the UTF-8 of the whole, the same as concatenated", () => {
    const target = Buffer.alloc(256);
    const length = writePieces(pieces, target);
    assert.ok(length !== null);
    assert.deepEqual(target.subarray(0, length), concatPieces(pieces));
    assert.deepEqual(JSON.parse(target.subarray(0, length).toString()), { data: [{ name: "Zoë" }, { name: "日本 🎉" }] });
  });

  test("a page that does not fit is refused, also when a string would be cut inside a character", () => {
    const whole = concatPieces(pieces).length;
    assert.equal(writePieces(pieces, Buffer.alloc(whole - 1)), null);
    assert.equal(writePieces(["é".repeat(10)], Buffer.alloc(21)), null, "21 bytes hold 10 two-byte characters, but with fewer than 4 to spare");
    assert.equal(writePieces(["🎉"], Buffer.alloc(5)), null, "a four-byte character with one byte to spare");
    assert.equal(writePieces([Buffer.alloc(8), "x"], Buffer.alloc(8)), null, "no room left for text after bytes that fill it");
    assert.equal(writePieces(["🎉"], Buffer.alloc(8)), 4);
  });
});
