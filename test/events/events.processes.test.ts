// Events out against real `storefront serve` processes: two processes on one PostgreSQL sharing the
// dispatch (each event sent once), and kill -9 in the middle of a stream of payments (every committed
// change has its event, and every event reaches the receiver after a restart).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createServices, type Services } from "../../src/services.ts";
import { freshDatabase, pgSkip, type DialectName } from "../helpers/harness.ts";
import { startReceiver } from "../helpers/receiver.ts";
import { startServer } from "../helpers/server.ts";
import { SIGNED_PLUGIN, TEST_SECRET, sign } from "../helpers/webhook.ts";

async function setup(databaseUrl: string, secretsKey: string, invoices: number, endpointUrl: string) {
  const services = await createServices(loadConfig({ DATABASE_URL: databaseUrl, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", ENDPOINT_ALLOW: "127.0.0.1" }));
  const store = await services.stores.createStore("procs");
  await services.plugins.install(store.id, "pay", { source: SIGNED_PLUGIN, secrets: { key: TEST_SECRET } });
  const customer = await services.customers.create(store.id, { email: "p@example.com" });
  const ids: string[] = [];
  for (let i = 0; i < invoices; i++) {
    ids.push((await services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 10 }] })).id);
  }
  // Subscribed after the checkouts: the receiver gets exactly the payments.
  const endpoint = await services.events.createEndpoint(store.id, { url: endpointUrl, types: ["invoice.completed"] });
  return { services, storeId: store.id, invoiceIds: ids, secret: endpoint.secret };
}

function pay(base: string, storeId: string, invoiceId: string): Promise<Response> {
  const body = JSON.stringify({ type: "paid", invoiceId });
  return fetch(`${base}/api/paymentPlugins?pluginName=pay&storeId=${storeId}`, { method: "POST", headers: { "content-type": "application/json", "x-signature": sign(body) }, body });
}

async function completedEvents(services: Services, storeId: string) {
  return services.db.kysely.selectFrom("events").select(["id", "data"]).where("store_id", "=", storeId).where("type", "=", "invoice.completed").execute();
}

describe("two service processes on one PostgreSQL share the dispatch", { skip: pgSkip }, () => {
  test("payments split over two processes: every event reaches the receiver once, one attempt each", async () => {
    const db = await freshDatabase("postgres");
    const receiver = await startReceiver();
    const secretsKey = randomBytes(32).toString("hex");
    const env = { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PLUGIN_POOL_SIZE: "1", WEBHOOK_RATE_LIMIT_MAX: "100000", ENDPOINT_ALLOW: "127.0.0.1" };
    const { services, storeId, invoiceIds, secret } = await setup(db.url, secretsKey, 60, receiver.url);
    const a = await startServer(env);
    const b = await startServer(env);
    try {
      const answers = await Promise.all(invoiceIds.map((id, i) => pay(i % 2 === 0 ? a.url : b.url, storeId, id)));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      await receiver.waitFor(60, 20_000);
      await new Promise((r) => setTimeout(r, 1000)); // room for a duplicate to show up
      const events = await completedEvents(services, storeId);
      assert.equal(events.length, 60);
      assert.equal(receiver.received.length, 60, "no event sent twice");
      assert.deepEqual(receiver.verifiedWith(secret).sort(), events.map((e) => e.id).sort());
      const attempts = await services.db.kysely.selectFrom("event_attempts").select(["event_id"]).where("store_id", "=", storeId).execute();
      assert.equal(attempts.length, 60);
      assert.equal(new Set(attempts.map((x) => x.event_id)).size, 60);
    } finally {
      await a.stop();
      await b.stop();
      await receiver.close();
      await services.close();
      await db.drop();
    }
  });
});

for (const dialect of ["sqlite", "postgres"] as DialectName[]) {
  describe(`kill -9 in the middle of payments with an endpoint on ${dialect}`, { skip: dialect === "postgres" ? pgSkip : false }, () => {
    test("every committed change has its event, no event without its change, and every event reaches the receiver", async () => {
      const db = await freshDatabase(dialect);
      const receiver = await startReceiver();
      const secretsKey = randomBytes(32).toString("hex");
      const env = { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PLUGIN_POOL_SIZE: "1", WEBHOOK_RATE_LIMIT_MAX: "100000", ENDPOINT_ALLOW: "127.0.0.1" };
      const { services, storeId, invoiceIds, secret } = await setup(db.url, secretsKey, 100, receiver.url);
      let server = await startServer(env);
      try {
        let next = 0;
        const worker = async () => {
          while (next < invoiceIds.length) {
            const id = invoiceIds[next++]!;
            await pay(server.url, storeId, id).catch(() => null);
          }
        };
        const stream = Promise.all([worker(), worker(), worker(), worker()]);
        while (next < 50) await new Promise((r) => setTimeout(r, 5));
        await server.kill9();
        await stream;

        const completed = await services.db.kysely.selectFrom("invoices").select("id").where("store_id", "=", storeId).where("status", "=", "completed").execute();
        assert.ok(completed.length > 0 && completed.length < 100, `some but not all payments went through (${completed.length})`);
        const events = await completedEvents(services, storeId);
        assert.deepEqual(
          events.map((e) => (JSON.parse(e.data) as { invoice: { id: string; status: string } }).invoice.id).sort(),
          completed.map((c) => c.id).sort(),
          "exactly one invoice.completed per completed invoice",
        );
        // The dead process's claims hold for their lease (45 s); move them to now rather than wait.
        await services.db.kysely.updateTable("event_deliveries").set({ next_attempt_at: Date.now() }).where("status", "=", "pending").execute();
        server = await startServer(env);
        const missing = () => {
          const got = new Set(receiver.verifiedWith(secret));
          return events.filter((e) => !got.has(e.id)).map((e) => e.id);
        };
        const deadline = Date.now() + 20_000;
        while (missing().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(missing(), [], "every event reached the receiver, verified");
      } finally {
        await server.stop();
        await receiver.close();
        await services.close();
        await db.drop();
      }
    });
  });
}
