// Operations and administration through the real app: health, readiness, metrics, OpenAPI, the rate limit,
// the admin token, and checkout's validation.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { buildApp } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";
import { createServices } from "../../../src/services.ts";
import { DIALECTS, createHarness, expectStatus, freshDatabase, type Harness } from "../../helpers/harness.ts";

type Json = Record<string, unknown>;

for (const dialect of DIALECTS) {
  describe(`operations and admin on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { RATE_LIMIT_MAX: "3", RATE_LIMIT_WINDOW_MS: "60000" });
    });
    after(async () => {
      await h?.close();
    });

    test("healthz and readyz answer, metrics are Prometheus text with request counters", async () => {
      expectStatus(await h.get("/healthz"), 200);
      const ready = await h.get("/readyz");
      expectStatus(ready, 200);
      assert.deepEqual(ready.json(), { status: "ready", details: { proxy: { trustProxy: "none", untrustedForwardedFor: null } } });
      const metrics = await h.get("/metrics");
      expectStatus(metrics, 200);
      assert.match(String(metrics.headers["content-type"]), /text\/plain/);
      assert.match(metrics.body, /storefront_http_requests_total\{method="GET",route="\/readyz",status="200"\} 1/);
      assert.match(metrics.body, /process_cpu_user_seconds_total/);
    });

    test("openapi.json is OpenAPI 3.1 with both list operations, their parameters and schemas", async () => {
      const r = await h.get("/openapi.json");
      expectStatus(r, 200);
      const doc = r.json<{ openapi: string; paths: Record<string, Record<string, { parameters: { name: string; in: string }[] }>>; components: Json }>();
      assert.equal(doc.openapi, "3.1.0");
      for (const [path, extra] of [["/api/service/customers", ["email"]], ["/api/service/invoices", []]] as const) {
        const names = doc.paths[path]!.get!.parameters.filter((p) => p.in === "query").map((p) => p.name).sort();
        assert.deepEqual(names, ["createdAtFrom", "createdAtTo", "cursor", ...extra, "id", "limit", "status"].sort());
      }
      const schemas = doc.components.schemas as Record<string, unknown>;
      for (const name of ["Customer", "Invoice", "CustomerInvoice", "Error"]) assert.ok(schemas[name], `schema ${name}`);
      const docs = await h.get("/docs/");
      expectStatus(docs, 200);
      assert.match(docs.body, /swagger/i);
    });

    test("the read API is rate limited per key: 429 rate_limited with Retry-After, other keys unaffected", async () => {
      const s1 = await h.store("limited");
      const s2 = await h.store("other");
      for (let i = 0; i < 3; i++) expectStatus(await h.get("/api/service/invoices", s1.key), 200);
      const limited = await h.get("/api/service/invoices", s1.key);
      expectStatus(limited, 429);
      assert.equal(limited.json<{ error: Json }>().error.code, "rate_limited");
      assert.ok(Number(limited.headers["retry-after"]) > 0, "Retry-After in seconds");
      expectStatus(await h.get("/api/service/invoices", s2.key), 200);
    });

    test("admin API needs the admin token", async () => {
      const none = await h.app.inject({ method: "POST", url: "/api/admin/stores", payload: { name: "x" } });
      expectStatus(none, 401);
      const wrong = await h.app.inject({ method: "POST", url: "/api/admin/stores", payload: { name: "x" }, headers: { authorization: "Bearer nope" } });
      expectStatus(wrong, 401);
      const { key } = await h.store();
      const withApiKey = await h.app.inject({ method: "GET", url: "/api/admin/stores", headers: { authorization: `Bearer ${key}` } });
      expectStatus(withApiKey, 401);
    });

    test("checkout: total is the sum of price × quantity, in cents without float drift", async () => {
      const s = await h.store();
      const c = await h.customer(s.id);
      const inv = await h.checkout(s.id, {
        customerId: c.id,
        paymentMethod: "stripe",
        items: [
          { productVariantId: "a", quantity: 3, price: 0.1 },
          { productVariantId: "b", quantity: 1, price: 0.2 },
        ],
      });
      assert.equal(inv.totalInUsd, 0.5);
      assert.equal(inv.status, "pending");
    });

    test("checkout errors: unknown store 404, another store's customer 404, bad price 400, missing items 400, unknown field 400", async () => {
      const s = await h.store();
      const other = await h.store();
      const c = await h.customer(other.id);
      const item = { productVariantId: "a", quantity: 1, price: 1 };
      const cases: [string, Json, number, string, string?][] = [
        ["st_doesnotexist", { customerId: c.id, paymentMethod: "x", items: [item] }, 404, "store_not_found"],
        [s.id, { customerId: c.id, paymentMethod: "x", items: [item] }, 404, "customer_not_found", "customerId"],
        [s.id, { customerId: "x", paymentMethod: "x", items: [{ ...item, price: 1.001 }] }, 404, "customer_not_found"],
        [other.id, { customerId: c.id, paymentMethod: "x", items: [{ ...item, price: 1.001 }] }, 400, "invalid_request", "items[0].price"],
        [other.id, { customerId: c.id, paymentMethod: "x", items: [] }, 400, "invalid_request", "items"],
        [other.id, { customerId: c.id, paymentMethod: "x", items: [{ ...item, quantity: 0 }] }, 400, "invalid_request", "items[0].quantity"],
        [other.id, { customerId: c.id, paymentMethod: "x", items: [item], total: 5 }, 400, "invalid_request", "total"],
        [other.id, { customerId: c.id, items: [item] }, 400, "invalid_request", "paymentMethod"],
      ];
      for (const [storeId, body, status, code, param] of cases) {
        const r = await h.admin("POST", `/api/admin/stores/${storeId}/invoices`, body);
        assert.equal(r.statusCode, status, `${JSON.stringify(body)} → ${r.body}`);
        const err = r.json<{ error: Json }>().error;
        assert.equal(err.code, code);
        if (param) assert.equal(err.param, param);
      }
    });

    test("malformed JSON body is 400 invalid_request, oversized body is 413 payload_too_large", async () => {
      const bad = await h.app.inject({
        method: "POST",
        url: "/api/admin/stores",
        headers: { authorization: "Bearer test-admin-token-0123456789", "content-type": "application/json" },
        payload: "{not json",
      });
      expectStatus(bad, 400);
      assert.equal(bad.json<{ error: Json }>().error.code, "invalid_request");
      const big = await h.app.inject({
        method: "POST",
        url: "/api/admin/stores",
        headers: { authorization: "Bearer test-admin-token-0123456789", "content-type": "application/json" },
        payload: JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) }),
      });
      expectStatus(big, 413);
      assert.equal(big.json<{ error: Json }>().error.code, "payload_too_large");
    });

    test("keys: unknown scope 400, revoking an unknown key 404, another store's key 404", async () => {
      const s = await h.store();
      const other = await h.store();
      const bad = await h.admin("POST", `/api/admin/stores/${s.id}/keys`, { scopes: ["everything"] });
      expectStatus(bad, 400);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${s.id}/keys/key_nope`), 404);
      const k = await h.admin("POST", `/api/admin/stores/${other.id}/keys`, {});
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${s.id}/keys/${k.json<{ id: string }>().id}`), 404);
    });
  });
}

describe("internal errors", () => {
  test("an unexpected failure is a 500 internal_error that shows no internals", async () => {
    const db = await freshDatabase("sqlite");
    const services = await createServices(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: "silent" }));
    const app = await buildApp(services, { logger: false });
    const store = await services.stores.createStore("s");
    const { key } = await services.stores.createKey(store.id);
    const customer = await services.customers.create(store.id, { email: "a@example.com" });
    await services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "x", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
    await services.db.kysely.schema.dropTable("invoice_views").execute(); // the next page's query fails inside SQL
    const failing = await app.inject({ method: "GET", url: "/api/service/invoices", headers: { authorization: key } });
    expectStatus(failing, 500);
    const err = failing.json<{ error: Json }>().error;
    assert.equal(err.code, "internal_error");
    assert.doesNotMatch(failing.body, /invoice_views|SQLITE|no such table/i);
    assert.equal(err.requestId, failing.headers["x-request-id"]);
    await app.close();
    await services.close();
    await db.drop();
  });
});
