// PostgreSQL: every statement of a projector pass plans as lookups by key under the settings of the pool it
// runs on (planned once, without its values, for the connection's life: database.ts, BY_KEY_SETTINGS). A
// plan that reads a whole table would be kept however large that table grows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sql } from "kysely";
import { pgSkip } from "../helpers/harness.ts";
import { SET_LOCAL_BY_KEY, withSeededStore } from "../helpers/seeded-store.ts";

test("PostgreSQL: no statement of a projector pass plans a sequential scan, planned once and by key", { skip: pgSkip }, async () => {
  let statements: string[] | null = null;
  await withSeededStore(
    async (db, storeId, services) => {
      await sql.raw("analyze").execute(db);
      // Five invoices changed (their documents and their customers' marked).
      const ids = (await sql<{ id: string }>`select id from invoices where store_id = ${storeId} order by id limit 5`.execute(db)).rows.map((r) => r.id);
      for (const id of ids) await sql`insert into invoice_logs (invoice_id, log, type, created_at) values (${id}, 'checked', 'info', 1)`.execute(db);
      await sql`update invoices set updated_at = updated_at + 1 where id = any(${ids}::text[])`.execute(db);
      statements = [];
      await services.projector.runOnce();
      const sent = [...new Set(statements.filter((s) => !/^(begin|commit)$/i.test(s)))];
      statements = null;
      assert.ok(sent.length >= 7, `a pass's statements:\n${sent.join("\n")}`);
      for (const text of sent) {
        const params = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
        const plan = await db.connection().execute(async (c) => {
          await sql.raw(`begin; ${SET_LOCAL_BY_KEY}; prepare s as ${text}`).execute(c);
          const args = params === 0 ? "" : `(${Array.from({ length: params }, () => "null").join(", ")})`;
          const { rows } = await sql.raw<{ "QUERY PLAN": string }>(`explain execute s${args}`).execute(c);
          await sql.raw("deallocate s; rollback").execute(c);
          return rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        assert.doesNotMatch(plan, /Seq Scan/, `${text}\n${plan}`);
      }
    },
    { onQuery: (text) => statements?.push(text) },
  );
});
