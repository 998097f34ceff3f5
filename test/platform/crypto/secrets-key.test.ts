// A SECRETS_KEY that cannot open the stored plugin secrets loses no delivery: `serve` refuses to start
// naming the variable, a delivery that meets such secrets anyway is recorded and answered 503 (the
// provider retries), and `storefront secrets rekey` moves every secret to a new key.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { buildApp } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";
import { createServices } from "../../../src/services.ts";
import { ADMIN_TOKEN, createHarness, expectStatus, type Harness } from "../../helpers/harness.ts";
import { startServer } from "../../helpers/server.ts";
import { SIGNED_PLUGIN, deliverSigned, installPlugin, invoiceView } from "../../helpers/webhook.ts";

const run = promisify(execFile);
const MAIN = path.resolve(import.meta.dirname, "../../../src/main.ts");

describe("a SECRETS_KEY that does not open the stored secrets (SQLite)", () => {
  let h: Harness;
  const otherKey = randomBytes(32).toString("hex");
  before(async () => {
    h = await createHarness("sqlite");
  });
  after(async () => {
    await h?.close();
  });

  async function withOtherKey<T>(fn: (app: Awaited<ReturnType<typeof buildApp>>) => Promise<T>): Promise<T> {
    const services = await createServices(loadConfig({ DATABASE_URL: h.databaseUrl, ADMIN_TOKEN, LOG_LEVEL: "silent", SECRETS_KEY: otherKey }));
    const app = await buildApp(services, { logger: false });
    try {
      return await fn(app);
    } finally {
      await app.close();
      await services.close();
    }
  }

  test("serve refuses to start, naming SECRETS_KEY and the way out", async () => {
    const store = await h.store();
    await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
    await assert.rejects(startServer({ DATABASE_URL: h.databaseUrl, SECRETS_KEY: otherKey }), (err: Error) => {
      assert.match(err.message, /exited with 78/);
      assert.match(err.message, /SECRETS_KEY cannot open the secrets of \d+ installed plugin/);
      assert.match(err.message, /secrets rekey/);
      return true;
    });
  });

  test("a delivery that meets unreadable secrets is recorded whole and answered 503 with Retry-After and x-delivery-id", async () => {
    const store = await h.store();
    await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
    const body = JSON.stringify({ type: "paid", invoiceId: "inv_x" });
    const r = await withOtherKey((app) => app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, payload: body, headers: { "content-type": "application/json" } }));
    assert.equal(r.statusCode, 503, r.body);
    assert.equal(r.json<{ error: { code: string } }>().error.code, "secrets_unavailable");
    assert.ok(r.headers["retry-after"]);
    const id = String(r.headers["x-delivery-id"]);
    const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${id}`);
    expectStatus(d, 200);
    assert.equal(d.json<{ outcome: string }>().outcome, "secrets_unavailable");
    assert.equal(d.json<{ request: { body: string } }>().request.body, body, "kept whole, for replay");
  });

  test("re-installing under the other key with every secret sent again replaces them; a partial set is refused with the missing names", async () => {
    const store = await h.store();
    await installPlugin(h, store.id, "pay", SIGNED_PLUGIN, { key: "k-one-value", extra: "e-one-value" });
    await withOtherKey(async (app) => {
      const put = (secrets: Record<string, string>) =>
        app.inject({ method: "PUT", url: `/api/admin/stores/${store.id}/plugins/pay`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { source: SIGNED_PLUGIN, secrets } });
      const partial = await put({ key: "k-two-value" });
      assert.equal(partial.statusCode, 409, partial.body);
      assert.match(partial.body, /missing: extra/);
      expectStatus(await put({ key: "k-two-value", extra: "e-two-value" }), 200);
    });
  });

  test("storefront secrets rekey moves every secret to the new key; deliveries then verify under it", async () => {
    const store = await h.store();
    await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 3 }] });
    const dir = mkdtempSync(path.join(os.tmpdir(), "rekey-"));
    const oldKeyFile = path.join(dir, "old.key");
    writeFileSync(oldKeyFile, h.config.secretsKey!);
    const env = { ...process.env, DATABASE_URL: h.databaseUrl, SECRETS_KEY: otherKey, LOG_LEVEL: "silent" };
    const { stdout } = await run(process.execPath, [MAIN, "secrets", "rekey", "--from-file", oldKeyFile], { env });
    const report = JSON.parse(stdout) as { moved: number; alreadyNew: number; unreadable: unknown[] };
    assert.ok(report.moved >= 1, stdout);
    assert.deepEqual(report.unreadable, []);
    const again = JSON.parse((await run(process.execPath, [MAIN, "secrets", "rekey", "--from-file", oldKeyFile], { env })).stdout) as { moved: number };
    assert.equal(again.moved, 0, "a second run finds everything under the new key");

    await withOtherKey(async (app) => {
      const harness = { ...h, app } as Harness;
      expectStatus(await deliverSigned(harness, store.id, { type: "paid", invoiceId: invoice.id }), 200);
    });
    assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
    await assert.rejects(startServer({ DATABASE_URL: h.databaseUrl, SECRETS_KEY: h.config.secretsKey! }), /exited with 78/, "the old key is refused now");
  });
});
