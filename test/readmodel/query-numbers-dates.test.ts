// Whole numbers and dates in a query are read as a person wrote them: a number is plain decimal digits
// (no hex, no surrounding spaces), and a year 0000-0099 is that year, not 19xx (JavaScript's Date.UTC
// quirk), on both databases.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parseIsoDate } from "../../src/lib/list-query.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

describe("dates before the year 100", () => {
  test("a year 0000-0099 is read as that year, not as 1900-1999", () => {
    assert.equal(new Date(parseIsoDate("0099-01-01", false)!).getUTCFullYear(), 99);
    assert.equal(new Date(parseIsoDate("0050-06-15T12:00:00Z", false)!).toISOString(), "0050-06-15T12:00:00.000Z");
    assert.equal(new Date(parseIsoDate("0000-12-31", true)!).toISOString(), "0000-12-31T23:59:59.999Z");
  });

  test("year 0 is a leap year (proleptic Gregorian), 1900 is not", () => {
    assert.notEqual(parseIsoDate("0000-02-29", false), null);
    assert.equal(parseIsoDate("1900-02-29", false), null);
  });
});

for (const dialect of DIALECTS) {
  describe(`query numbers and early dates on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let store: { id: string; key: string };
    let customer: string;
    before(async () => {
      h = await createHarness(dialect.name);
      store = await h.store();
      // Created in 1950: inside 1900-1999, outside 0000-0099.
      h.clock.set("1950-06-01T00:00:00.000Z");
      customer = (await h.customer(store.id)).id;
      h.clock.set("2024-01-01T00:00:00.000Z");
    });
    after(async () => {
      await h?.close();
    });

    test("createdAtTo=0099-12-31 ends in the year 99: a customer of 1950 is not in it", async () => {
      const r = await h.get("/api/service/customers?createdAtTo=0099-12-31", store.key);
      expectStatus(r, 200);
      assert.deepEqual(r.json<{ data: { customers: unknown[] } }>().data.customers, []);
    });

    test("createdAtFrom=0099-01-01 starts in the year 99: a customer of 1950 is in it", async () => {
      const r = await h.get("/api/service/customers?createdAtFrom=0099-01-01", store.key);
      expectStatus(r, 200);
      assert.deepEqual(r.json<{ data: { customers: { id: string }[] } }>().data.customers.map((c) => c.id), [customer]);
    });

    for (const raw of ["0x10", "%205", "5%20", "1e1", "+5", "05.0", "0b11"]) {
      test(`limit=${raw} is 400 naming limit: only plain decimal digits are a number`, async () => {
        for (const path of ["/api/service/customers", "/api/service/invoices", "/api/service/events"]) {
          const r = await h.get(`${path}?limit=${raw}`, store.key);
          expectStatus(r, 400);
          assert.equal(r.json<{ error: { param: string } }>().error.param, "limit", path);
        }
        const admin = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=${raw}`);
        expectStatus(admin, 400);
        assert.equal(admin.json<{ error: { param: string } }>().error.param, "limit");
      });
    }

    test("limit=05 and limit=16 are still numbers", async () => {
      expectStatus(await h.get("/api/service/customers?limit=05", store.key), 200);
      expectStatus(await h.get("/api/service/invoices?limit=16", store.key), 200);
    });
  });
}
