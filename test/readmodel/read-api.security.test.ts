// Read-API authentication and isolation, on SQLite and PostgreSQL: both Authorization forms, 401 before
// validation, revoked keys, scopes, one store never seeing another's rows or cursors, and x-request-id.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { buildFixture, customersPage, ids, invoicesPage, type Fixture, type Json } from "../helpers/read-api.ts";

for (const dialect of DIALECTS) {
  describe(`read API security on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let f: Fixture;
    before(async () => {
      h = await createHarness(dialect.name);
      f = await buildFixture(h);
    });
    after(async () => {
      await h?.close();
    });

    const customers = (query = "", key = f.a.key) => customersPage(h, query, key);
    const invoices = (query = "", key = f.a.key) => invoicesPage(h, query, key);

    test("both Authorization forms are accepted: raw key and Bearer", async () => {
      expectStatus(await h.get("/api/service/customers", f.a.key), 200);
      expectStatus(await h.get("/api/service/customers", `Bearer ${f.a.key}`), 200);
      expectStatus(await h.get("/api/service/customers", `bearer ${f.a.key}`), 200);
    });

    test("security: no key, unknown key and malformed header are 401 with the error envelope", async () => {
      for (const auth of [null, "sk_unknownkeyunknownkeyunknownkey", "Bearer", "Basic abc def", `Bearer ${f.a.key}x`]) {
        const r = await h.get("/api/service/invoices", auth);
        expectStatus(r, 401);
        assert.equal(r.json<{ error: Json }>().error.code, "unauthorized");
      }
    });

    test("security: authentication comes before validation, so bad parameters without a key are 401", async () => {
      expectStatus(await h.get("/api/service/invoices?limit=0"), 401);
    });

    test("security: a revoked key is refused at once", async () => {
      const created = await h.admin("POST", `/api/admin/stores/${f.a.id}/keys`, {});
      const { id, key } = created.json<{ id: string; key: string }>();
      expectStatus(await h.get("/api/service/invoices", key), 200);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${f.a.id}/keys/${id}`), 204);
      expectStatus(await h.get("/api/service/invoices", key), 401);
      const list = await h.admin("GET", `/api/admin/stores/${f.a.id}/keys`);
      const listed = list.json<{ data: Json[] }>().data.find((k) => k.id === id)!;
      assert.ok(listed.revokedAt, "listing shows the revocation");
      assert.equal(JSON.stringify(list.json()).includes(key), false, "listing never shows the key");
    });

    test("security: a key without the scope is 403 forbidden", async () => {
      const created = await h.admin("POST", `/api/admin/stores/${f.a.id}/keys`, { scopes: ["invoices:read"] });
      const { key, scopes } = created.json<{ key: string; scopes: string[] }>();
      assert.deepEqual(scopes, ["invoices:read"]);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      const r = await h.get("/api/service/customers", key);
      expectStatus(r, 403);
      assert.equal(r.json<{ error: Json }>().error.code, "forbidden");
    });

    test("security: another store's key sees only its own store, even when asking for this store's ids", async () => {
      assert.deepEqual(ids((await customers("", f.b.key)).data.customers), [f.otherStoreCustomer]);
      assert.deepEqual(ids((await invoices("", f.b.key)).data.invoices), [f.otherStoreInvoice]);
      for (const id of [f.alice, f.inv1.id, "disc-alice", f.inv1.createdOnSessionId as string]) {
        assert.deepEqual((await customers(`?id=${id}`, f.b.key)).data.customers, [], `customers id=${id}`);
        assert.deepEqual((await invoices(`?id=${id}`, f.b.key)).data.invoices, [], `invoices id=${id}`);
      }
      assert.deepEqual((await invoices(`?id=${f.otherStoreInvoice}`)).data.invoices, [], "store A cannot see B's invoice by id");
      assert.deepEqual((await customers(`?id=${f.otherStoreCustomer}`)).data.customers, []);
      assert.deepEqual((await customers("?id=disc-eve")).data.customers, []);
      assert.deepEqual(ids((await customers("?id=var-ebook", f.b.key)).data.customers), [f.otherStoreCustomer], "shared variant ids stay per store");
    });

    test("security: a cursor from another store's page leaks nothing", async () => {
      const page = await invoices("?limit=1", f.a.key);
      const r = await invoices(`?limit=5&cursor=${page.pagination.nextCursor}`, f.b.key);
      for (const inv of r.data.invoices) assert.equal(inv.id, f.otherStoreInvoice);
    });

    test("every response carries x-request-id, an incoming sane one is kept", async () => {
      const r = await h.get("/api/service/invoices", f.a.key, { "x-request-id": "provider-abc-123" });
      assert.equal(r.headers["x-request-id"], "provider-abc-123");
      const bad = await h.get("/nowhere", null, { "x-request-id": "bad id\nwith newline" });
      expectStatus(bad, 404);
      assert.notEqual(bad.headers["x-request-id"], "bad id\nwith newline");
      assert.equal(bad.json<{ error: Json }>().error.code, "not_found");
      assert.equal(bad.json<{ error: Json }>().error.requestId, bad.headers["x-request-id"]);
    });
  });
}
