// What one payment costs the database, counted: every statement the services send through Kysely between
// the delivery's arrival and its answer, BEGIN and COMMIT included. The payment's transaction holds only
// the money path (claim, compare-and-set, log lines, event with its fan-out, delivery record); the read
// model's documents follow after the commit. A customer's history must not add statements.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { statementsSent } from "../helpers/statements-sent.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

const APPLIED_MAX = 10;
const DUPLICATE_MAX = 4;
/**
 * PostgreSQL, where each statement is a round trip: the read, then the writes as one statement that commits
 * on its own (the server's commits durable by default, as here): no BEGIN, no COMMIT.
 */
const APPLIED_MAX_POSTGRES = 2;

for (const dialect of DIALECTS) {
  describe(`statements of one payment on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const log = statementsSent();
    before(async () => {
      h = await createHarness(dialect.name, {}, { onQuery: log.onQuery });
    });
    after(async () => {
      await h?.close();
    });

    test(`an applied payment sends at most ${APPLIED_MAX} statements, BEGIN and COMMIT included`, async () => {
      const { store, invoice } = await paymentSetup(h);
      // Warm: the plugin's first run compiles and caches what can be cached.
      const warm = await h.checkout(store.id, { customerId: invoice.customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: warm.id })).statusCode, 200);
      let answer: { statusCode: number; json: <T>() => T } | undefined;
      const sent = await log.during(async () => {
        answer = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      });
      assert.equal(answer?.statusCode, 200);
      assert.ok(sent.length <= APPLIED_MAX, `${sent.length} statements:\n${sent.join("\n")}`);
    });

    if (dialect.name === "postgres") {
      test(`on PostgreSQL an applied payment is ${APPLIED_MAX_POSTGRES} statements: its writes go as one, committed on its own`, async () => {
        const { store, invoice } = await paymentSetup(h);
        const warm = await h.checkout(store.id, { customerId: invoice.customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
        assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: warm.id })).statusCode, 200);
        const sent = await log.during(async () => assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id })).statusCode, 200));
        assert.ok(sent.length <= APPLIED_MAX_POSTGRES, `${sent.length} statements:\n${sent.join("\n")}`);
        assert.ok(!sent.some((s) => /^(begin|commit)\b/i.test(s)), `no transaction of its own:\n${sent.join("\n")}`);
        const writes = sent.find((s) => s.startsWith("with"));
        for (const table of ["applied_events", "invoices", "invoice_logs", "event_sequences", "events", "event_deliveries", "deliveries"]) assert.match(writes ?? "", new RegExp(`(insert into|update) "?${table}"? `), `the one write statement writes ${table}`);
      });

      test("on PostgreSQL the payments' write statement is prepared once per connection, not parsed and planned for each payment", async () => {
        const { store, invoice } = await paymentSetup(h);
        for (let i = 0; i < 4; i++) {
          const next = await h.checkout(store.id, { customerId: invoice.customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
          assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: next.id })).statusCode, 200);
        }
        // The server's own record of each idle connection's prepared statements.
        const pool = h.services.db.pgPool!;
        const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
        let runs = 0;
        try {
          for (const client of clients) {
            const { rows } = await client.query<{ runs: string }>("select coalesce(sum(generic_plans + custom_plans), 0) as runs from pg_prepared_statements where statement like 'with claim as%'");
            runs += Number(rows[0]!.runs);
          }
        } finally {
          for (const client of clients) client.release();
        }
        assert.ok(runs >= 1, "the write statement is among the connections' prepared statements");
      });
    }

    test(`a duplicate event sends at most ${DUPLICATE_MAX} statements`, async () => {
      const { store, invoice } = await paymentSetup(h);
      assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id })).statusCode, 200);
      const sent = await log.during(() => deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }));
      assert.ok(sent.length <= DUPLICATE_MAX, `${sent.length} statements:\n${sent.join("\n")}`);
    });

    test("a customer with 300 invoices pays with the statements of one with a single invoice, none reading the others", async () => {
      const { store, customer, invoice } = await paymentSetup(h);
      assert.equal((await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id })).statusCode, 200);
      const small = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      const one = await log.during(() => deliverSigned(h, store.id, { type: "paid", invoiceId: small.id }));
      const busy = await h.customer(store.id);
      for (let i = 0; i < 300; i++) await h.checkout(store.id, { customerId: busy.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      const last = await h.checkout(store.id, { customerId: busy.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      const many = await log.during(() => deliverSigned(h, store.id, { type: "paid", invoiceId: last.id }));
      assert.deepEqual(many, one);
      // Nothing of the customer is read or written: no statement names the customer's invoices or documents.
      const customerWide = many.filter((s) => /"customer_id" in|"customers"|customer_views/.test(s));
      assert.deepEqual(customerWide, []);
    });
  });
}
