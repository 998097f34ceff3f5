// What a payment's caller is shown is scrubbed of the plugin's secrets, as its record is: a plugin that
// returns a secret as the invoice id does not get it echoed in the 404's message.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

const SECRET = "sk_live_never_shown_0123456789";

for (const dialect of DIALECTS) {
  describe(`a payment's answer on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name);
    });
    after(async () => {
      await h?.close();
    });

    test("a secret returned as the invoice id is not in the 404 answer, nor in its record", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "leaky", `return { status = "pushInvoice", invoiceId = secrets.key }`, { key: SECRET });
      const r = await deliver(h, store.id, "leaky", "{}");
      assert.equal(r.statusCode, 404);
      assert.equal(r.json<{ error: { code: string } }>().error.code, "invoice_not_found");
      assert.ok(!r.body.includes(SECRET), `the answer shows the secret: ${r.body}`);
      const record = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${String(r.headers["x-delivery-id"])}`);
      assert.ok(!record.body.includes(SECRET), "the record shows the secret");
    });

    test("a secret returned as the invoice id of an ignore is not echoed in the 200", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "leaky", `return { status = "ignore", invoiceId = secrets.key }`, { key: SECRET });
      const r = await deliver(h, store.id, "leaky", "{}");
      assert.equal(r.statusCode, 200);
      assert.ok(!r.body.includes(SECRET), `the answer shows the secret: ${r.body}`);
    });
  });
}
