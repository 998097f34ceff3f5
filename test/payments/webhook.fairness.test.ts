// One store's flood cannot hold up another store's payments, through the real webhook route, on SQLite
// and PostgreSQL: the other store's delivery is answered while the flood runs, and the flooding store's
// deliveries past its queue bound are answered 503 service_unavailable with Retry-After, and recorded.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

for (const dialect of DIALECTS) {
  describe(`webhook fairness between stores on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, {
        PLUGIN_POOL_SIZE: "2",
        PLUGIN_CPU_MS: "100",
        PLUGIN_WALL_MS: "3000",
        PLUGIN_MAX_QUEUED_PER_STORE: "4",
        WEBHOOK_RATE_LIMIT_MAX: "100000",
      });
    });
    after(async () => {
      await h?.close();
    });

    test("a store flooding endless loops gets 503 + Retry-After past its queue bound; another store's delivery is answered first", async () => {
      const flooder = await h.store("flooder");
      const other = await h.store("other");
      await installPlugin(h, flooder.id, "loop", "while true do end");
      await installPlugin(h, other.id, "quick", `return { status = "ignore" }`);
      // Both workers started.
      for (let i = 0; i < 4; i++) assert.equal((await deliver(h, other.id, "quick", "{}")).statusCode, 200);

      let floodAnswered = 0;
      const flood = Array.from({ length: 12 }, () =>
        deliver(h, flooder.id, "loop", "{}").then((r) => {
          floodAnswered++;
          return r;
        }),
      );
      // Let the flood reach the sandbox before the other store's delivery arrives.
      while (floodAnswered === 0) await new Promise((r) => setTimeout(r, 5));
      const quick = await deliver(h, other.id, "quick", "{}");
      const answeredBefore = floodAnswered;
      assert.equal(quick.statusCode, 200, quick.body);
      assert.deepEqual(quick.json(), { status: "ignore" });

      const answers = await Promise.all(flood);
      const busy = answers.filter((r) => r.statusCode === 503);
      const timedOut = answers.filter((r) => r.statusCode === 504);
      assert.equal(busy.length + timedOut.length, 12, answers.map((r) => r.statusCode).join(","));
      assert.ok(busy.length >= 4, `${busy.length} refused`);
      // The only flood answers before the other store's were the instant refusals (and at most one run).
      assert.ok(answeredBefore <= busy.length + 1, `${answeredBefore} flood answers came first, ${busy.length} of them refusals`);
      for (const r of busy) {
        const error = r.json<{ error: { code: string; message: string; deliveryId: string } }>().error;
        assert.equal(error.code, "service_unavailable");
        assert.match(error.message, /already has 4 plugin runs waiting/);
        assert.match(String(r.headers["retry-after"]), /^[1-9][0-9]*$/);
        assert.equal(r.headers["x-delivery-id"], error.deliveryId);
      }
      const id = busy[0]!.json<{ error: { deliveryId: string } }>().error.deliveryId;
      const recorded = await h.admin("GET", `/api/admin/stores/${flooder.id}/deliveries/${id}`);
      assert.equal(recorded.statusCode, 200);
      assert.equal(recorded.json<{ outcome: string }>().outcome, "plugin_busy");
    });

    test("the webhook's OpenAPI responses list 503", async () => {
      const doc = (await h.get("/openapi.json")).json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>();
      const responses = doc.paths["/api/paymentPlugins"]!.post!.responses;
      assert.ok(responses["503"], `responses: ${Object.keys(responses).join(", ")}`);
    });
  });
}
