// Migration 0016 (PostgreSQL): a page filtered by `id` reads its documents by id through a hash index, two
// buffers a document instead of a B-tree descent and the row (four), with the plan the reader threads run
// (a generic plan of the prepared page statement, src/platform/db/database.ts genericPlans).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { sql } from "kysely";
import { loadConfig } from "../../../../src/config.ts";
import { createCustomersRepository } from "../../../../src/readmodel/customer-documents.ts";
import type { PreparedStatement } from "../../../../src/platform/db/database.ts";
import { DOCUMENT_HASH_INDEXES } from "../../../../src/platform/db/migrations/0016_documents_hash_ids.ts";
import { createInvoicesRepository } from "../../../../src/readmodel/invoice-documents.ts";
import { parseListQuery } from "../../../../src/lib/list-query.ts";
import { seedStore } from "../../../../src/seed/seed.ts";
import { createServices } from "../../../../src/services.ts";
import { freshDatabase, pgSkip } from "../../../helpers/harness.ts";
import { INVOICE_STATUSES } from "../../../../src/schemas/invoice-statuses.ts";

const UNTIL = Date.parse("2026-01-01T00:00:00.000Z");

/** Plan node lines of EXPLAIN (text) that read `table`. */
const readsOf = (plan: string[], table: string) => plan.filter((line) => new RegExp(`on ${table} `).test(line));

test("PostgreSQL: an id-filtered page reads its documents through the hash index of ids, in the readers' generic plan", { skip: pgSkip }, async () => {
  const database = await freshDatabase("postgres");
  const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", SECRETS_KEY: randomBytes(32).toString("hex") });
  const services = await createServices(config);
  try {
    const { storeId } = await seedStore(services.db, { customers: 400, seed: 11, until: UNTIL });
    const db = services.db.kysely;
    // The variant with the most invoice items: a full page of matches.
    const popular = await db
      .selectFrom("invoice_items")
      .select(["product_variant_id as id", (eb) => eb.fn.countAll<string>().as("n")])
      .where("store_id", "=", storeId)
      .groupBy("product_variant_id")
      .orderBy("n", "desc")
      .limit(1)
      .executeTakeFirstOrThrow();
    assert.ok(Number(popular.id === null ? 0 : popular.n) > 100, `a variant on more than a page of invoices (${popular.n})`);

    // The page statements as the repositories bind them, captured instead of run.
    const captured: { statement: PreparedStatement; params: unknown[] }[] = [];
    const source = {
      kysely: db,
      dialect: "postgres" as const,
      prepared: { all: async (statement: PreparedStatement, params: unknown[]) => (captured.push({ statement, params }), []) },
    };
    const q = parseListQuery({ limit: 100, id: popular.id! }, INVOICE_STATUSES);
    await createInvoicesRepository(source as never).listPage(storeId, q);
    await createCustomersRepository(source as never).listPage(storeId, q);
    assert.equal(captured.length, 2, "one statement per page on PostgreSQL");

    await sql`vacuum analyze`.execute(db);
    for (const [i, { statement, params }] of captured.entries()) {
      const views = i === 0 ? "invoice_views" : "customer_views";
      const plan = await db.connection().execute(async (c) => {
        await sql`set plan_cache_mode = force_generic_plan`.execute(c);
        // A store this small fits a hash join over a scan of every document; a large one gets a lookup per
        // key (the benchmark's 100k store does). Which index that lookup takes is what is tested here.
        await sql`set enable_seqscan = off; set enable_hashjoin = off; set enable_mergejoin = off`.execute(c);
        await sql.raw(`prepare page_${i} as ${statement.sql}`).execute(c);
        const values = params.map((p) => (typeof p === "number" ? String(p) : `'${String(p).replaceAll("'", "''")}'`)).join(", ");
        const { rows } = await sql.raw<{ "QUERY PLAN": string }>(`explain execute page_${i}(${values})`).execute(c);
        await sql.raw(`deallocate page_${i}; reset all`).execute(c);
        return rows.map((r) => r["QUERY PLAN"]);
      });
      const reads = readsOf(plan, views);
      assert.equal(reads.length, 1, `${views} read once:\n${plan.join("\n")}`);
      assert.match(reads[0]!, new RegExp(`Index Scan using ${DOCUMENT_HASH_INDEXES[views]} on ${views}`), plan.join("\n"));
    }
  } finally {
    await services.close();
    await database.drop();
  }
});
