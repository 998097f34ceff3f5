// Malformed read-API parameters, on SQLite and PostgreSQL: each is a 400 invalid_request naming the
// parameter, in the error envelope, and none reaches the database.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { buildFixture, type Fixture, type Json } from "../helpers/read-api.ts";

for (const dialect of DIALECTS) {
  describe(`read API bad requests on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let f: Fixture;
    before(async () => {
      h = await createHarness(dialect.name);
      f = await buildFixture(h);
    });
    after(async () => {
      await h?.close();
    });

    for (const [path, param] of [
      ["invoices?status=paid", "status"],
      ["invoices?status=", "status"],
      ["invoices?status=completed,,pending", "status"],
      ["customers?status=Completed", "status"],
      ["invoices?email=alice@example.com", "email"],
      ["customers?email=", "email"],
      // PostgreSQL text cannot hold NUL: such a value matches nothing and must not reach the database.
      ["customers?email=a%00b@example.com", "email"],
      ["invoices?id=inv_%00", "id"],
      ["customers?id=%00", "id"],
      [`invoices?cursor=${Buffer.from(JSON.stringify([1, "inv_\u0000"])).toString("base64url")}`, "cursor"],
    ] as const) {
      test(`${path} is 400 invalid_request naming ${param}`, async () => {
        const r = await h.get(`/api/service/${path}`, f.a.key);
        expectStatus(r, 400);
        const err = r.json<{ error: Json }>().error;
        assert.equal(err.code, "invalid_request");
        assert.equal(err.param, param);
      });
    }

    const badRequests: [string, string][] = [
      ["?createdAtFrom=yesterday", "createdAtFrom"],
      ["?createdAtFrom=2023-13-01", "createdAtFrom"],
      ["?createdAtFrom=2023-02-30", "createdAtFrom"],
      ["?createdAtTo=2023-06-01T25:00:00Z", "createdAtTo"],
      ["?createdAtTo=2023-06-01T10:00:00", "createdAtTo"],
      ["?createdAtFrom=1686787200", "createdAtFrom"],
      ["?createdAtFrom=2023-07-01&createdAtTo=2023-06-01", "createdAtFrom"],
      ["?limit=0", "limit"],
      ["?limit=501", "limit"],
      ["?limit=ten", "limit"],
      ["?limit=1.5", "limit"],
      ["?cursor=not-a-cursor", "cursor"],
      [`?cursor=${Buffer.from('["x","y"]').toString("base64url")}`, "cursor"],
      ["?id=", "id"],
      ["?id=a&id=b", "id"],
      ["?page=2", "page"],
      ["?storeId=other", "storeId"],
    ];
    for (const path of ["customers", "invoices"]) {
      for (const [query, param] of badRequests) {
        test(`${path}${query} is 400 invalid_request naming ${param}`, async () => {
          const r = await h.get(`/api/service/${path}${query}`, f.a.key);
          expectStatus(r, 400);
          const err = r.json<{ error: Json }>().error;
          assert.equal(err.code, "invalid_request");
          assert.equal(err.param, param);
          assert.equal(typeof err.message, "string");
          assert.equal(err.requestId, r.headers["x-request-id"]);
        });
      }
    }
  });
}
