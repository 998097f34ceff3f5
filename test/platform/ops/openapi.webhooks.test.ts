// The outbound events in /openapi.json's `webhooks` section: one per event type, with the Standard
// Webhooks headers, a schema and a full example; the examples validate against the schemas, and so do the
// events the service really writes (one invoice through every status, one broken plugin run).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { TSchema } from "typebox";
import { Value } from "typebox/value";
import { exampleEvent } from "../../../src/events/event-examples.ts";
import { DeliveryFailedEventSchema, InvoiceEventSchema } from "../../../src/events/events.schemas.ts";
import { EVENT_TYPES } from "../../../src/events/events.types.ts";
import { InvoiceSchema } from "../../../src/schemas/invoices.schemas.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../../helpers/harness.ts";
import { deliver, deliverSigned, installPlugin, paymentSetup } from "../../helpers/webhook.ts";

type Json = Record<string, unknown>;
interface Webhook {
  post: {
    operationId: string;
    parameters: { name: string; in: string; required: boolean }[];
    requestBody: { content: { "application/json": { schema: { $ref: string }; example: Json } } };
    responses: Record<string, unknown>;
  };
}

const context = { Invoice: InvoiceSchema };
const schemaOf = (type: string): TSchema => (type === "delivery.failed" ? DeliveryFailedEventSchema : InvoiceEventSchema);
const problems = (schema: TSchema, value: unknown) => JSON.stringify([...Value.Errors(context, schema, value)].slice(0, 3));

describe("the OpenAPI document's webhooks", () => {
  let h: Harness;
  let doc: { openapi: string; webhooks: Record<string, Webhook>; components: { schemas: Record<string, Json> } };
  before(async () => {
    h = await createHarness("sqlite");
    doc = (await h.get("/openapi.json")).json();
  });
  after(async () => {
    await h?.close();
  });

  test("list every event type once, each a POST with the Standard Webhooks headers, a schema and an example", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.deepEqual(Object.keys(doc.webhooks ?? {}).sort(), [...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const op = doc.webhooks[type]!.post;
      const required = op.parameters.filter((p) => p.in === "header" && p.required).map((p) => p.name);
      assert.deepEqual(required, ["webhook-id", "webhook-timestamp", "webhook-signature", "storefront-version"], type);
      const json = op.requestBody.content["application/json"];
      const component = json.schema.$ref.replace("#/components/schemas/", "");
      assert.ok(doc.components.schemas[component], `${type}: ${component} is in components`);
      assert.deepEqual(json.example, exampleEvent(type));
      assert.equal(json.example.type, type);
      assert.ok(op.responses["2XX"] && op.responses["410"], `${type}: what the receiver's answers mean`);
    }
  });

  test("each example is a full event that validates against its schema", () => {
    for (const type of EVENT_TYPES) {
      const example = exampleEvent(type);
      assert.ok(Value.Check(context, schemaOf(type), example), `${type}: ${problems(schemaOf(type), example)}`);
    }
    assert.equal(Value.Check(context, InvoiceEventSchema, { ...exampleEvent("invoice.created"), data: { invoice: { id: "inv_1" } } }), false, "the check can fail");
  });
});

for (const { name: dialect, skip } of DIALECTS) {
  describe(`events the service writes on ${dialect}`, { skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect, { INVOICE_PAYMENT_WINDOW_MINUTES: "60" });
    });
    after(async () => {
      await h?.close();
    });

    test("validate against the schemas the webhooks section documents, one of each type", async () => {
      const { store, customer, invoice } = await paymentSetup(h);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/invoices/${invoice.id}/refund`, {}), 200);
      const toCancel = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/invoices/${toCancel.id}/cancel`, {}), 200);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 2 }] });
      h.clock.advance(61 * 60_000);
      await h.services.invoiceLifecycle.expireDue();
      await installPlugin(h, store.id, "broken", 'error("no")');
      expectStatus(await deliver(h, store.id, "broken", "{}"), 500);

      const r = await h.get("/api/service/events?limit=100", store.key);
      expectStatus(r, 200);
      const events = r.json<{ data: { events: Json[] } }>().data.events;
      assert.deepEqual([...new Set(events.map((e) => e.type))].sort(), [...EVENT_TYPES].sort(), "one of each type");
      for (const event of events) {
        const schema = schemaOf(String(event.type));
        assert.ok(Value.Check(context, schema, event), `${String(event.type)}: ${problems(schema, event)}`);
      }
    });
  });
}
