// PostgreSQL: a page looks up each of its documents' marks through the marks' index, also after a bulk
// write left the marks table large (or large in the planner's statistics, its rows deleted but not yet
// vacuumed). Before, `id in (select doc_id from stale_…)` read every mark once per statement: 28–110 ms a
// page after 300,000 marks instead of ~1 ms (src/readmodel/paging.ts, freshBody). So does a projector pass,
// for the documents it rebuilds (src/readmodel/projector.postgres.ts, lockWithMarksQuery).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { sql } from "kysely";
import { loadConfig } from "../../src/config.ts";
import { parseListQuery } from "../../src/lib/list-query.ts";
import type { PreparedStatement } from "../../src/platform/db/database.ts";
import { createCustomersRepository } from "../../src/readmodel/customer-documents.ts";
import { createInvoicesRepository } from "../../src/readmodel/invoice-documents.ts";
import { lockWithMarksQuery } from "../../src/readmodel/projector.postgres.ts";
import { INVOICE_STATUSES } from "../../src/schemas/invoice-statuses.ts";
import { createServices } from "../../src/services.ts";
import { freshDatabase, pgSkip } from "../helpers/harness.ts";
import { SET_LOCAL_BY_KEY, withSeededStore } from "../helpers/seeded-store.ts";

const VIEWS = ["invoice_views", "customer_views"] as const;


test("PostgreSQL: after a bulk write, a page probes each document's mark through the index, never a scan of every mark", { skip: pgSkip }, async () => {
  await withSeededStore(async (db, storeId) => {
    // The unfiltered page statements as the repositories bind them, captured instead of run.
    const captured: { statement: PreparedStatement; params: unknown[] }[] = [];
    const source = {
      kysely: db,
      dialect: "postgres" as const,
      prepared: { all: async (statement: PreparedStatement, params: unknown[]) => (captured.push({ statement, params }), []) },
    };
    const q = parseListQuery({ limit: 100 }, INVOICE_STATUSES);
    await createInvoicesRepository(source as never).listPage(storeId, q);
    await createCustomersRepository(source as never).listPage(storeId, q);
    assert.equal(captured.length, 2, "one statement per page on PostgreSQL");

    const planOf = (i: number) =>
      db.connection().execute(async (c) => {
        const { statement, params } = captured[i]!;
        // The readers run a generic plan of the prepared statement (src/platform/db/database.ts).
        await sql`set plan_cache_mode = force_generic_plan`.execute(c);
        await sql.raw(`prepare page_${i} as ${statement.sql}`).execute(c);
        const values = params.map((p) => (typeof p === "number" ? String(p) : `'${String(p).replaceAll("'", "''")}'`)).join(", ");
        const { rows } = await sql.raw<{ "QUERY PLAN": string }>(`explain (analyze, costs off) execute page_${i}(${values})`).execute(c);
        await sql.raw(`deallocate page_${i}; reset all`).execute(c);
        return rows.map((r) => r["QUERY PLAN"]).join("\n");
      });
    const expectProbes = async (when: string) => {
      for (const [i, views] of VIEWS.entries()) {
        const plan = await planOf(i);
        assert.doesNotMatch(plan, new RegExp(`Seq Scan on stale_${views}`), `${when}: ${views}' page scans every mark:\n${plan}`);
        assert.match(plan, new RegExp(`Index (Only )?Scan using stale_${views}_doc on stale_${views}`), `${when}: ${views}' page:\n${plan}`);
      }
    };

    // Autovacuum stays out of the way: the test sets the statistics it describes.
    for (const views of VIEWS) await sql.raw(`alter table stale_${views} set (autovacuum_enabled = false)`).execute(db);
    // 1. A bulk write left 300,000 marks; the projector deleted them; their dead rows are not vacuumed yet.
    for (const views of VIEWS) {
      await sql.raw(`insert into stale_${views} (doc_id, created_at) select 'gone_' || g, 0 from generate_series(1, 300000) g`).execute(db);
      await sql.raw(`analyze stale_${views}`).execute(db);
      await sql.raw(`delete from stale_${views}`).execute(db);
    }
    await expectProbes("300,000 marks deleted, not vacuumed");
    // 2. A bulk write under way: 30,000 marks, analyzed, some of them this page's documents.
    for (const views of VIEWS) {
      await sql.raw(`insert into stale_${views} (doc_id, created_at) select 'other_' || g, 0 from generate_series(1, 30000) g`).execute(db);
      await sql.raw(`insert into stale_${views} (doc_id, created_at) select id, 0 from ${views} where store_id = '${storeId}' limit 10`).execute(db);
      await sql.raw(`analyze stale_${views}`).execute(db);
    }
    await expectProbes("30,000 marks");
  });
});

test("PostgreSQL: the marks tables are vacuumed and analyzed after every 1,000 changes (migration 0022)", { skip: pgSkip }, async () => {
  const database = await freshDatabase("postgres");
  const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", SECRETS_KEY: randomBytes(32).toString("hex") });
  const services = await createServices(config);
  try {
    const { rows } = await sql<{ relname: string; reloptions: string[] | null }>`
      select relname, reloptions from pg_class where oid in ('stale_customer_views'::regclass, 'stale_invoice_views'::regclass) order by relname`.execute(services.db.kysely);
    assert.deepEqual(rows.map((r) => r.relname), ["stale_customer_views", "stale_invoice_views"]);
    for (const r of rows) {
      for (const option of ["autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_scale_factor=0", "autovacuum_analyze_threshold=1000", "autovacuum_analyze_scale_factor=0"]) {
        assert.ok(r.reloptions?.includes(option), `${r.relname}: ${option} in ${JSON.stringify(r.reloptions)}`);
      }
    }
  } finally {
    await services.close();
    await database.drop();
  }
});

test("PostgreSQL: a projector pass reads its documents' marks through the index and probes its documents by id, in custom and generic plans", { skip: pgSkip }, async () => {
  await withSeededStore(async (db, storeId) => {
    for (const views of VIEWS) await sql.raw(`alter table stale_${views} set (autovacuum_enabled = false)`).execute(db);
    for (const views of VIEWS) {
      // A backlog: marks of other documents, and some of the pass's own.
      await sql.raw(`insert into stale_${views} (doc_id, created_at) select 'other_' || g, 0 from generate_series(1, 3000) g`).execute(db);
      const ids = (await sql.raw<{ id: string }>(`select id from ${views} where store_id = '${storeId}' limit 100`).execute(db)).rows.map((r) => r.id);
      await sql.raw(`insert into stale_${views} (doc_id, created_at) select unnest(array[${ids.map((id) => `'${id}'`).join(", ")}]), 0`).execute(db);
      await sql.raw(`analyze stale_${views}`).execute(db);
      // A pass of ten of them, and a document that is gone, whose candidate is tested against the documents table.
      const candidates = [...ids.slice(0, 10), "gone_1"];
      const { sql: text } = lockWithMarksQuery(views, candidates).compile(db);
      const array = `'{${candidates.join(",")}}'`;
      // Planned for its values, and as the service's projector plans it (once, by key).
      for (const mode of ["set local plan_cache_mode = force_custom_plan", SET_LOCAL_BY_KEY]) {
        const plan = await db.connection().execute(async (c) => {
          await sql.raw(`begin; ${mode}; prepare pass as ${text}`).execute(c);
          const { rows } = await sql.raw<{ "QUERY PLAN": string }>(`explain (analyze, costs off) execute pass(${array})`).execute(c);
          await sql.raw("deallocate pass; rollback").execute(c);
          return rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        assert.doesNotMatch(plan, new RegExp(`Seq Scan on stale_${views}`), `${views}, ${mode}: the pass scans every mark:\n${plan}`);
        assert.match(plan, new RegExp(`Index (Only )?Scan (using|on) stale_${views}_doc`), `${views}, ${mode}:\n${plan}`);
        // The documents table is probed by id, never read whole (its rows hashed, or scanned).
        const documentRows = [...plan.matchAll(new RegExp(`Scan (?:using \\w+ )?on ${views}\\b[^\\n]*rows=(\\d+) loops=(\\d+)`, "g"))].map((m) => Number(m[1]) * Number(m[2]));
        assert.ok(documentRows.length > 0 && documentRows.every((n) => n <= candidates.length), `${views}, ${mode}: documents rows read ${documentRows}:\n${plan}`);
      }
    }
  });
});
