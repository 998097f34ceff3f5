// /metrics answers operators' questions: plugin runs by outcome and their durations, the sandbox's queue,
// webhook answers by status, the database pool (PostgreSQL), with labels that never name a store.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createMetrics } from "../../../src/platform/ops/metrics.ts";
import { instrumentSandbox } from "../../../src/sandbox/sandbox.metrics.ts";
import type { RunOutcome, Sandbox } from "../../../src/sandbox/index.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../../helpers/harness.ts";
import { deliver, deliverSigned, installPlugin, paymentSetup } from "../../helpers/webhook.ts";
import { sample } from "../../helpers/metrics.ts";

for (const dialect of DIALECTS) {
  describe(`metrics on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      // Four verified deliveries below; the forged and the missing-plugin ones count against their own limit.
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "4" });
    });
    after(async () => {
      await h?.close();
    });

    test("plugin runs by outcome with durations and queue waits, webhook answers by status (429 included), no store or invoice ids in any label", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "boom", 'error("boom")', {});
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "noise" }), 200);
      expectStatus(await deliver(h, store.id, "pay", "{}", { "x-signature": "forged" }), 401);
      expectStatus(await deliver(h, store.id, "boom", "{}"), 500);
      expectStatus(await deliver(h, store.id, "missing", "{}"), 404);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 429);
      const simulated = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/pay/simulate`, { body: "{}" });
      expectStatus(simulated, 200);

      const m = await h.get("/metrics");
      expectStatus(m, 200);
      const text = m.body;
      assert.equal(sample(text, 'storefront_plugin_runs_total{outcome="pushInvoice"}'), 1);
      assert.equal(sample(text, 'storefront_plugin_runs_total{outcome="disputeInvoice"}'), 1);
      assert.equal(sample(text, 'storefront_plugin_runs_total{outcome="ignore"}'), 1);
      assert.equal(sample(text, 'storefront_plugin_runs_total{outcome="rejected"}'), 2, "the forged delivery and the unsigned simulation");
      assert.equal(sample(text, 'storefront_plugin_runs_total{outcome="script_error"}'), 1);
      assert.equal(sample(text, 'storefront_plugin_run_duration_seconds_count{outcome="pushInvoice"}'), 1);
      assert.ok(sample(text, 'storefront_plugin_run_duration_seconds_sum{outcome="pushInvoice"}')! > 0);
      assert.equal(sample(text, "storefront_sandbox_queue_wait_seconds_count"), 6, "one wait per run");
      assert.equal(sample(text, "storefront_sandbox_runs_in_flight"), 0);
      assert.equal(sample(text, "storefront_sandbox_queue_depth"), 0);
      assert.equal(sample(text, "storefront_sandbox_workers"), 2);
      assert.equal(sample(text, 'storefront_webhook_responses_total{status="200"}'), 3);
      assert.equal(sample(text, 'storefront_webhook_responses_total{status="401"}'), 1);
      assert.equal(sample(text, 'storefront_webhook_responses_total{status="404"}'), 1);
      assert.equal(sample(text, 'storefront_webhook_responses_total{status="500"}'), 1);
      assert.equal(sample(text, 'storefront_webhook_responses_total{status="429"}'), 1);
      for (const id of [store.id, invoice.id, "boom", "missing"]) assert.ok(!text.includes(id), `${id} appears in /metrics`);
    });

    test(`database metrics: ${dialect.name === "postgres" ? "the pool's busy, idle and waiting connections" : "the dialect only (SQLite has no pool)"}`, async () => {
      const text = (await h.get("/metrics")).body;
      assert.equal(sample(text, `storefront_db_info{dialect="${dialect.name}"}`), 1);
      if (dialect.name === "postgres") {
        assert.equal(sample(text, "storefront_db_pool_max"), 10);
        const busy = sample(text, 'storefront_db_pool_connections{state="busy"}');
        const idle = sample(text, 'storefront_db_pool_connections{state="idle"}');
        assert.ok(busy !== null && idle !== null && idle >= 1 && busy + idle <= 10, `busy ${busy}, idle ${idle}`);
        assert.equal(sample(text, "storefront_db_pool_waiting"), 0);
      } else {
        assert.doesNotMatch(text, /storefront_db_pool_/);
      }
    });
  });
}

test("sandbox queue: runs beyond the workers count as waiting, and each run's wait is its time before it started", async () => {
  const metrics = createMetrics();
  const release: (() => void)[] = [];
  // A sandbox of one worker, answered by the test: the second and third runs wait for the first.
  const inner: Sandbox = {
    run: () =>
      new Promise<RunOutcome>((resolve) => {
        const queuedAt = performance.now();
        release.push(() => resolve({ ok: true, result: { status: "ignore" }, logs: [], fetches: [], durationMs: (performance.now() - queuedAt) / 2 }));
      }),
    check: () => ({ ok: true }),
    close: async () => {},
  };
  const sandbox = instrumentSandbox(inner, metrics, 1);
  const host = { getInvoice: async () => null };
  const input = { source: "", request: { method: "POST", body: Buffer.alloc(0), headers: {}, query: {} }, store: { id: "st" }, plugin: { name: "p", version: 1 }, secrets: {} };
  const runs = [sandbox.run(input, host), sandbox.run(input, host), sandbox.run(input, host)];
  const during = await metrics.registry.metrics();
  assert.equal(sample(during, "storefront_sandbox_runs_in_flight"), 3);
  assert.equal(sample(during, "storefront_sandbox_queue_depth"), 2);
  await new Promise((r) => setTimeout(r, 20));
  for (const r of release) r();
  await Promise.all(runs);
  const done = await metrics.registry.metrics();
  assert.equal(sample(done, "storefront_sandbox_queue_depth"), 0);
  assert.equal(sample(done, "storefront_sandbox_queue_wait_seconds_count"), 3);
  // Each run took ~20 ms in `run`, half of it reported as run time: ~10 ms of waiting each.
  const waited = sample(done, "storefront_sandbox_queue_wait_seconds_sum")!;
  assert.ok(waited > 0.015 && waited < 1, `total wait ${waited} s`);
  assert.equal(sample(done, 'storefront_plugin_runs_total{outcome="ignore"}'), 3);
});
