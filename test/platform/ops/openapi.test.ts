// The OpenAPI document that tools accept: Redocly's recommended rules report nothing; every operation has
// an operationId, security and real response descriptions, also routes added later (the completion is
// generic); examples come from the demo data and still validate; /docs says storefront.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { TSchema } from "typebox";
import { Value } from "typebox/value";
import { CustomerSchema } from "../../../src/schemas/customers.schemas.ts";
import { CustomerInvoiceSchema, InvoiceSchema } from "../../../src/schemas/invoices.schemas.ts";
import { ErrorSchema } from "../../../src/schemas/common.schemas.ts";
import { completeOpenApi, deriveOperationId } from "../../../src/platform/ops/openapi.ts";
import { OPENAPI_EXAMPLES, REQUEST_EXAMPLES } from "../../../src/platform/ops/openapi.examples.ts";
import { dumpOpenApi, lintOpenApi } from "../../../tools/openapi-lint.ts";
import { createHarness, expectStatus, type Harness } from "../../helpers/harness.ts";

type Json = Record<string, unknown>;
interface Operation {
  operationId?: string;
  security?: unknown[];
  responses: Record<string, { description: string }>;
  requestBody?: { content: Record<string, { example?: unknown }> };
}
const METHODS = ["get", "put", "post", "delete", "patch"];

test("`npm run lint:openapi`: Redocly's recommended rules find no error and no warning in the served document", async () => {
  const file = await dumpOpenApi();
  const { status, output } = lintOpenApi(file);
  assert.equal(status, 0, output);
  assert.match(output, /Your API description is valid/);
  assert.doesNotMatch(output, /You have \d+ warning/);
});

describe("the served OpenAPI document", () => {
  let h: Harness;
  let doc: { info: Json; servers: Json[]; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Json> } };
  before(async () => {
    h = await createHarness("sqlite");
    doc = (await h.get("/openapi.json")).json();
  });
  after(async () => {
    await h?.close();
  });

  const operations = () => Object.entries(doc.paths).flatMap(([path, ops]) => METHODS.filter((m) => ops[m]).map((m) => ({ path, method: m, op: ops[m]! })));

  test("every operation: a unique operationId, security (empty only on the probes, the webhook and the console's sign-in), described responses", () => {
    const ids = operations().map((o) => o.op.operationId);
    assert.ok(ids.every((id) => typeof id === "string" && /^[a-z][A-Za-z0-9]+$/.test(id)), ids.join(", "));
    assert.equal(new Set(ids).size, ids.length, "unique");
    const publicOps = operations().filter((o) => o.op.security!.length === 0).map((o) => `${o.method.toUpperCase()} ${o.path}`).sort();
    assert.deepEqual(publicOps, ["GET /healthz", "GET /metrics", "GET /readyz", "POST /api/paymentPlugins", "POST /console/api/session"]);
    for (const { path, method, op } of operations()) {
      for (const [status, r] of Object.entries(op.responses)) assert.notEqual(r.description, "Default Response", `${method} ${path} ${status}`);
      if (op.security!.length > 0) assert.ok(op.responses["401"], `${method} ${path} lists 401`);
    }
    assert.deepEqual(doc.servers, [{ url: "/", description: "This storefront service (the address the document was read from)" }]);
    assert.equal(doc.info.title, "storefront");
  });

  test("names read like the operations: listCustomers, createInvoice, cancelInvoice, listPluginVersions, getDelivery, handlePaymentWebhook", () => {
    const byRoute = Object.fromEntries(operations().map((o) => [`${o.method.toUpperCase()} ${o.path}`, o.op.operationId]));
    assert.equal(byRoute["GET /api/service/customers"], "listCustomers");
    assert.equal(byRoute["POST /api/admin/stores/{storeId}/invoices"], "createInvoice");
    assert.equal(byRoute["POST /api/admin/stores/{storeId}/invoices/{invoiceId}/cancel"], "cancelInvoice");
    assert.equal(byRoute["GET /api/admin/stores/{storeId}/plugins/{name}/versions"], "listPluginVersions");
    assert.equal(byRoute["GET /api/admin/stores/{storeId}/deliveries/{deliveryId}"], "getDelivery");
    assert.equal(byRoute["POST /api/paymentPlugins"], "handlePaymentWebhook");
  });

  test("component examples come from the demo data and validate against their schemas", () => {
    const context = { CustomerInvoice: CustomerInvoiceSchema };
    const schemas: Record<string, TSchema> = { Customer: CustomerSchema, CustomerInvoice: CustomerInvoiceSchema, Invoice: InvoiceSchema, Error: ErrorSchema };
    for (const [name, schema] of Object.entries(schemas)) {
      const example = OPENAPI_EXAMPLES[name];
      assert.ok(example !== undefined, `an example for ${name}`);
      assert.ok(Value.Check(context, schema, example), `${name} example: ${JSON.stringify([...Value.Errors(context, schema, example)].slice(0, 3))}`);
      assert.deepEqual(doc.components.schemas[name]!.examples, [example]);
    }
  });

  test("each request example passes its route's validation (sent through the real app)", async () => {
    const store = await h.store("examples");
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
    const target = (path: string) => path.replace("{storeId}", store.id).replace("{invoiceId}", invoice.id).replace("{name}", "stripe");
    const withExamples = operations().filter((o) => o.op.requestBody?.content["application/json"]?.example !== undefined);
    assert.deepEqual(withExamples.map((o) => o.op.operationId).sort(), Object.keys(REQUEST_EXAMPLES).sort(), "every example found its operation");
    for (const { path, method, op } of withExamples) {
      const r = await h.admin(method.toUpperCase() as "POST" | "PUT", target(path), op.requestBody!.content["application/json"]!.example);
      // The shape is right (no 400); what the demo data refers to may not exist in this database (404, 409).
      assert.notEqual(r.statusCode, 400, `${op.operationId}: ${r.body}`);
      assert.ok(r.statusCode < 500, `${op.operationId}: ${r.body}`);
    }
  });

  test("/docs is storefront's: its title and logo", async () => {
    const page = await h.get("/docs/");
    expectStatus(page, 200);
    assert.match(page.body, /<title>storefront API<\/title>/);
    const init = await h.get("/docs/static/swagger-initializer.js");
    const logo = /data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)/.exec(init.body);
    assert.ok(logo, "a logo of our own");
    assert.match(Buffer.from(logo[1]!, "base64").toString(), />storefront</);
  });
});

test("routes added later get the same completion: operationId, public security, descriptions from the error list", () => {
  const cases: [string, string, string][] = [
    ["get", "/api/service/events", "listEvents"],
    ["post", "/api/admin/stores/{storeId}/endpoints", "createEndpoint"],
    ["patch", "/api/admin/stores/{storeId}/endpoints/{id}", "updateEndpoint"],
    ["get", "/api/admin/stores/{storeId}/endpoints/{id}/attempts", "listEndpointAttempts"],
    ["post", "/api/admin/stores/{storeId}/events/{eventId}/resend", "resendEvent"],
    ["post", "/api/admin/stores/{storeId}/plugins/{name}/rollback", "rollbackPlugin"],
    ["delete", "/api/admin/stores/{storeId}/plugins/{name}", "deletePlugin"],
    ["get", "/api/admin/stores/{storeId}", "getStore"],
  ];
  for (const [method, path, id] of cases) assert.equal(deriveOperationId(method, path, ["/api/admin", "/api/service", "/api"]), id, `${method} ${path}`);

  const doc = {
    paths: {
      "/api/service/events": { get: { summary: "Read the event feed", security: [{ apiKey: [] }], responses: { 200: { description: "Default Response" } } } },
      "/console/login": { post: { responses: { 204: { description: "Default Response" }, 429: { description: "Default Response" } } } },
      "/api/admin/stores/{storeId}/mine": { get: { operationId: "mine", security: [{ adminToken: [] }], responses: { 200: { description: "My own words" } } } },
      "/api/admin/stores/{storeId}/things": { get: { security: [{ adminToken: [] }], responses: {} } },
      "/api/admin/things": { get: { security: [{ adminToken: [] }], responses: {} } },
    },
  };
  const out = completeOpenApi(doc as unknown as Json, { prefixes: ["/api/admin", "/api/service", "/api"], examples: {} }) as unknown as { paths: Record<string, Record<string, Operation>> };
  const events = out.paths["/api/service/events"]!.get!;
  assert.equal(events.operationId, "listEvents");
  assert.equal(events.responses["200"]!.description, "Success: read the event feed");
  assert.match(events.responses["401"]!.description, /^Missing or invalid credentials.*error\.code: unauthorized/);
  const login = out.paths["/console/login"]!.post!;
  assert.deepEqual(login.security, []);
  assert.equal(login.responses["401"], undefined, "public: no 401 added");
  assert.match(login.responses["429"]!.description, /Retry-After.*error\.code: rate_limited/);
  const mine = out.paths["/api/admin/stores/{storeId}/mine"]!.get!;
  assert.equal(mine.operationId, "mine", "a route's own operationId is kept");
  assert.equal(mine.responses["200"]!.description, "My own words");
  // Both "things" routes derive listThings: the second spells its whole path.
  assert.equal(out.paths["/api/admin/stores/{storeId}/things"]!.get!.operationId, "listThings");
  assert.equal(out.paths["/api/admin/things"]!.get!.operationId, "getApiAdminThings");
});
