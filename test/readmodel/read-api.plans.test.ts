// The read pages' SQLite plans do not depend on statistics. A database grown from empty has none (its
// migrations analyzed empty tables, and nothing analyzes it later); a seeded one has the seed's. Under
// either, an `id`-filtered page finds its few candidates (the customer or invoice with that id, its chat
// account, its session...) by their ids: before, with no statistics, SQLite walked every element of the
// store to test each against the candidates (50 ms per invoices page at 100k customers, linear in the store).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createCustomersRepository } from "../../src/readmodel/customer-documents.ts";
import type { PreparedStatement } from "../../src/platform/db/database.ts";
import { createInvoicesRepository } from "../../src/readmodel/invoice-documents.ts";
import { parseListQuery } from "../../src/lib/list-query.ts";
import { seedStore } from "../../src/seed/seed.ts";
import { createServices } from "../../src/services.ts";
import { freshDatabase } from "../helpers/harness.ts";
import { INVOICE_STATUSES } from "../../src/schemas/invoice-statuses.ts";

const UNTIL = Date.parse("2026-01-01T00:00:00.000Z");

test("SQLite: an id-filtered page finds its few candidates by id, with no statistics and with a large seed's", async () => {
  const database = await freshDatabase("sqlite");
  const services = await createServices(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", SECRETS_KEY: randomBytes(32).toString("hex") }));
  try {
    const { storeId } = await seedStore(services.db, { customers: 200, seed: 12, until: UNTIL });
    const sqlite = services.db.sqlite!;
    const customerId = (sqlite.prepare("select id from customers where store_id = ? limit 1").get(storeId) as { id: string }).id;

    // The page statements as the repositories bind them, captured instead of run; on SQLite the first is the
    // few candidates' (the others walk the variant, review and coupon indexes).
    const captured: { statement: PreparedStatement; params: unknown[] }[] = [];
    const source = {
      kysely: services.db.kysely,
      dialect: "sqlite" as const,
      prepared: { all: async (statement: PreparedStatement, params: unknown[]) => (captured.push({ statement, params }), []) },
    };
    const q = parseListQuery({ limit: 100, id: customerId }, INVOICE_STATUSES);
    await createInvoicesRepository(source as never).listPage(storeId, q);
    const invoicesFew = captured[0]!;
    captured.length = 0;
    await createCustomersRepository(source as never).listPage(storeId, q);
    const customersFew = captured[0]!;

    const statistics: Record<string, () => void> = {
      "no statistics (grown from empty)": () => sqlite.exec("delete from sqlite_stat1"),
      // What a seed's analyze (1,000 rows sampled) leaves at 1M customers: one store seems to hold ~1,001 rows.
      "a 1M seed's statistics": () => {
        sqlite.exec("delete from sqlite_stat1");
        const insert = sqlite.prepare("insert into sqlite_stat1 (tbl, idx, stat) values (?, ?, ?)");
        for (const [table, rows] of [["customers", 1_000_000], ["invoices", 5_002_186]] as const) {
          insert.run(table, `${table}_page`, `${rows} 1001 1 1`);
          insert.run(table, `${table}_id_page`, `${rows} 1 1 1`);
          insert.run(table, `sqlite_autoindex_${table}_1`, `${rows} 1`);
        }
      },
    };
    for (const [name, set] of Object.entries(statistics)) {
      set();
      sqlite.exec("analyze sqlite_schema"); // the planner reads sqlite_stat1 again
      for (const [list, { statement, params }] of [["invoices", invoicesFew], ["customers", customersFew]] as const) {
        assert.match(statement.sql, new RegExp(`from "${list}" as "p"`), "the captured statement is the few candidates'");
        const plan = (sqlite.prepare(`explain query plan ${statement.sql}`).all(...params) as { detail: string }[]).map((r) => r.detail);
        const outer = plan[0]!;
        assert.match(outer, /^SEARCH p USING (COVERING )?INDEX \S+ \(id=\?\)$/, `${list}, ${name}: found by id\n${plan.join("\n")}`);
      }
    }

    // And the pages themselves are right: the customer's invoices, and the customer.
    const real = { kysely: services.db.kysely, dialect: "sqlite" as const, prepared: services.db.prepared };
    const invoices = await createInvoicesRepository(real as never).list(storeId, q);
    const expected = sqlite.prepare("select id from invoices where customer_id = ? order by created_at desc, id desc").all(customerId) as { id: string }[];
    assert.deepEqual(invoices.invoices.map((i) => i.id), expected.map((r) => r.id));
    const customers = await createCustomersRepository(real as never).list(storeId, q);
    assert.deepEqual(customers.customers.map((c) => c.id), [customerId]);
  } finally {
    await services.close();
    await database.drop();
  }
});
