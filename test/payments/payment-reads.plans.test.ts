// PostgreSQL: the payments' grouped read runs with a generic plan (planned once per connection, without its
// values, by key: the service's planned-once pool), kept for as long as the connection lives or the tables'
// statistics stay put. Whatever the values, and however the tables grew since it was planned, that plan must
// find each invoice, its children and its claim through their indexes, never by reading a whole table.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sql } from "kysely";
import { PAYMENT_SNAPSHOTS_SQL } from "../../src/invoices/invoices.repository.ts";
import { pgSkip } from "../helpers/harness.ts";
import { SET_LOCAL_BY_KEY, withSeededStore } from "../helpers/seeded-store.ts";

test("PostgreSQL: planned once without its values, the payments' grouped read finds invoices, children and claims by index, also once the claims outgrew the plan", { skip: pgSkip }, async () => {
  await withSeededStore(async (db, storeId) => {
    await sql.raw("analyze invoices, invoice_items, invoice_fields, invoice_logs").execute(db);
    const ids = (await sql<{ id: string }>`select id from invoices where store_id = ${storeId} order by id limit 8`.execute(db)).rows.map((r) => r.id);
    assert.equal(ids.length, 8);
    const array = (values: string[]) => `'{${values.join(",")}}'`;
    const args = [array(ids.map(() => storeId)), array(ids), array(ids.map(() => "pay")), array(ids.map((_, i) => `evt_${i}`))].join(", ");
    const plan = await db.connection().execute(async (c) => {
      await sql.raw(`begin; ${SET_LOCAL_BY_KEY}; prepare reads as ${PAYMENT_SNAPSHOTS_SQL}`).execute(c);
      // Planned while the store had taken no payment (a new service: its claims table never analyzed)…
      await sql.raw(`execute reads(${args})`).execute(c);
      // …and run after 5,000 payments, before any analyze of the claims.
      await sql.raw(
        `insert into applied_events (store_id, plugin_name, event_key, delivery_id, invoice_id, created_at) ` +
          `select '${storeId}', 'pay', 'old_' || g, 'dlv_' || g, 'inv_old', g from generate_series(1, 5000) g`,
      ).execute(c);
      const { rows } = await sql.raw<{ "QUERY PLAN": string }>(`explain (analyze, costs off) execute reads(${args})`).execute(c);
      await sql.raw("deallocate reads; rollback").execute(c);
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    assert.match(plan, /rows=8 loops=1/, `the eight invoices found:\n${plan}`);
    for (const table of ["invoices", "invoice_items", "invoice_fields", "invoice_logs", "applied_events"]) {
      assert.doesNotMatch(plan, new RegExp(`Seq Scan on ${table}\\b`), `${table} read whole:\n${plan}`);
    }
    assert.match(plan, /Index Scan using \w+ on invoices/, plan);
  });
});
