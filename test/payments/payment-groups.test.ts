// PostgreSQL: payments whose writes are ready while another payment's statement runs share the next
// statement (and its commit); one of them that lost its claim or its invoice's status meanwhile is run
// again alone, and the others of its group are applied all the same. Their reads, ready together, share a
// statement too, each payment given its own invoice.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import type pg from "pg";
import { type Applied, applyPayment, RetryPayment } from "../../src/payments/payment.apply.ts";
import { type PaymentStatements, postgresPaymentStatements } from "../../src/payments/payment.postgres.ts";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { installPlugin, SIGNED_PLUGIN } from "../helpers/webhook.ts";

const postgres = DIALECTS.find((d) => d.name === "postgres")!;

describe("payments written together on PostgreSQL", { skip: postgres.skip }, () => {
  let h: Harness;
  let statements: string[] = [];
  let grouped: PaymentStatements;
  /** Payments whose writes were handed to the writer (their reads done). */
  let readyToWrite = 0;
  before(async () => {
    h = await createHarness("postgres", {}, { onQuery: (text) => statements.push(text) });
    const statementsOf = postgresPaymentStatements(h.services.db.kysely);
    grouped = {
      read: statementsOf.read,
      write: (values) => {
        readyToWrite++;
        return statementsOf.write(values);
      },
    };
  });
  after(async () => {
    await h?.close();
  });

  async function storeWithInvoices(count: number) {
    const store = await h.store();
    await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
    const customer = await h.customer(store.id);
    const invoices: string[] = [];
    for (let i = 0; i < count; i++) invoices.push((await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] })).id);
    return { storeId: store.id, invoices };
  }

  const pay = (storeId: string, invoiceId: string): Promise<Applied | unknown> =>
    applyPayment(h.services.db.kysely, { storeId, pluginName: "pay", pluginVersion: 1, deliveryId: `dlv_${invoiceId}`, invoiceId, action: "pushInvoice", eventKey: `id:evt_${invoiceId}`, runLines: [{ log: `ran for ${invoiceId}`, type: "info" }] }, Date.now, undefined, grouped).catch((err: unknown) => err);

  const writes = () => statements.filter((s) => s.startsWith("with claim as"));
  const reads = () => statements.filter((s) => s.startsWith("select k.n,"));

  async function until(what: string, ready: () => boolean | Promise<boolean>): Promise<void> {
    for (let waited = 0; !(await ready()); waited++) {
      assert.ok(waited < 400, `never: ${what}`);
      await new Promise((res) => setTimeout(res, 5));
    }
  }
  /** Whether a payment's write statement waits on a lock held by the test (asked on a connection of its own). */
  const writeWaits = async () => (await h.services.db.pgPool!.query("select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like 'with claim as%'")).rows.length > 0;

  async function holding(queries: [string, unknown[]][]): Promise<pg.PoolClient> {
    const client = await h.services.db.pgPool!.connect();
    await client.query("begin");
    for (const [text, values] of queries) await client.query(text, values);
    return client;
  }

  async function state(invoiceId: string): Promise<{ status: string; lines: number }> {
    const db = h.services.db.kysely;
    const status = (await db.selectFrom("invoices").select("status").where("id", "=", invoiceId).executeTakeFirstOrThrow()).status;
    const lines = Number((await sql<{ n: string }>`select count(*) as n from invoice_logs where invoice_id = ${invoiceId} and log = ${`ran for ${invoiceId}`}`.execute(db)).rows[0]!.n);
    return { status, lines };
  }

  test("the payments ready while one payment's statement runs are written by the next statement, all of them applied", async () => {
    const { storeId, invoices } = await storeWithInvoices(6);
    const [first, ...rest] = invoices as [string, ...string[]];
    // The first payment's statement waits on its invoice's row, held by the test.
    const lock = await holding([["select 1 from invoices where id = $1 for update", [first]]]);
    statements = [];
    const firstPaid = pay(storeId, first);
    await until("the first payment's statement waits", writeWaits);
    const before = readyToWrite;
    const restPaid = rest.map((id) => pay(storeId, id));
    await until("the other payments read their invoices", () => readyToWrite === before + rest.length);
    await new Promise((res) => setImmediate(res));
    await lock.query("commit");
    lock.release();
    const outcomes = await Promise.all([firstPaid, ...restPaid]);
    assert.deepEqual(
      outcomes.map((o) => (o as Applied).kind),
      invoices.map(() => "changed"),
    );
    assert.equal(writes().length, 2, `one statement for the first, one for the five ready meanwhile:\n${writes().join("\n---\n")}`);
    for (const id of invoices) assert.deepEqual(await state(id), { status: "completed", lines: 1 }, `${id} is applied with its line`);
  });

  test("the reads of payments ready together are one statement, each payment given its own invoice", async () => {
    const { storeId, invoices } = await storeWithInvoices(3);
    statements = [];
    const missing = "inv_not_in_this_store";
    const outcomes = await Promise.all([invoices[0]!, missing, invoices[1]!, invoices[2]!].map((id) => pay(storeId, id)));
    assert.deepEqual(
      outcomes.map((o) => (o as Applied).kind),
      ["changed", "not_found", "changed", "changed"],
    );
    assert.equal(reads().length, 1, `one read for the four payments:\n${reads().join("\n---\n")}`);
    for (const id of invoices) assert.deepEqual(await state(id), { status: "completed", lines: 1 }, `${id} is applied with its line`);
  });

  test("a read the server refuses (a value it cannot take) fails that payment alone; the reads beside it are answered", async () => {
    const { storeId, invoices } = await storeWithInvoices(2);
    const statementsOf = postgresPaymentStatements(h.services.db.kysely);
    const key = (invoiceId: string) => ({ storeId, invoiceId, pluginName: "pay", eventKey: `id:evt_${invoiceId}` });
    // Asked directly: applyPayment answers such an id not_found without asking.
    const outcomes = await Promise.all([invoices[0]!, "inv_\u0000", invoices[1]!].map((id) => statementsOf.read(key(id)).then((s) => s?.row.id ?? null, (err: { code?: string }) => err.code)));
    assert.deepEqual(outcomes, [invoices[0], "22021", invoices[1]]);
  });

  test("a payment of a group whose claim was taken meanwhile is run again alone, and the others of the group are applied", async () => {
    const { storeId, invoices } = await storeWithInvoices(4);
    const [first, b, raced, d] = invoices as [string, string, string, string];
    const lock = await holding([["select 1 from invoices where id = $1 for update", [first]]]);
    // Another delivery of `raced`'s event holds its claim, not yet committed.
    const claim = await holding([["insert into applied_events (store_id, plugin_name, event_key, delivery_id, invoice_id, created_at) values ($1, 'pay', $2, 'dlv_other', $3, 0)", [storeId, `id:evt_${raced}`, raced]]]);
    statements = [];
    const firstPaid = pay(storeId, first);
    await until("the first payment's statement waits", writeWaits);
    const before = readyToWrite;
    const group = [b, raced, d].map((id) => pay(storeId, id));
    await until("the group's payments read their invoices", () => readyToWrite === before + 3);
    await new Promise((res) => setImmediate(res));
    await lock.query("commit");
    lock.release();
    assert.equal(((await firstPaid) as Applied).kind, "changed");
    // The group's statement now waits on the held claim; the other delivery commits it.
    await until("the group's statement waits on the claim", writeWaits);
    await claim.query("commit");
    claim.release();
    const [paidB, paidRaced, paidD] = await Promise.all(group);
    assert.equal((paidB as Applied).kind, "changed");
    assert.equal((paidD as Applied).kind, "changed");
    assert.ok(paidRaced instanceof RetryPayment, "the raced payment is to be run again (its read then finds the event applied)");
    assert.deepEqual(await state(b), { status: "completed", lines: 1 });
    assert.deepEqual(await state(d), { status: "completed", lines: 1 });
    assert.deepEqual(await state(raced), { status: "pending", lines: 0 }, "nothing of the raced payment stayed");
    assert.equal(writes().length, 5, "the first, the group's, then each of the group alone");
  });
});

describe("payments written together, when the connection fails", () => {
  test("a group whose statement met a broken connection is not written again: each of its payments hears the error", async () => {
    // A server that accepts the connection and closes it at once: the statement's fate is unknown to the client.
    const { createServer } = await import("node:net");
    let attempts = 0;
    const server = createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const { Kysely, PostgresDialect } = await import("kysely");
    const { default: pg } = await import("pg");
    const db = new Kysely<never>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: `postgres://x@127.0.0.1:${port}/x`, max: 1 }) }) });
    try {
      const writer = postgresPaymentStatements(db as never);
      const values = (n: number) => ({ claim: null, change: null, lines: [], event: null, fanOut: null, record: { id: `dlv_${n}` } as never });
      const outcomes = await Promise.all([1, 2, 3].map((n) => writer.write(values(n)).then(() => "written", (err: unknown) => err)));
      for (const outcome of outcomes) assert.ok(outcome instanceof Error && !/^[0-9A-Z]{5}$/.test(String((outcome as { code?: unknown }).code)), `the connection's error: ${String(outcome)}`);
      assert.equal(attempts, 1, "one connection for the group's statement, none for its payments alone after it");
    } finally {
      await db.destroy();
      server.close();
    }
  });
});
