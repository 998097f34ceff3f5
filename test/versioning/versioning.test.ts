// API and event versioning (README, "API versions") through the real app: the storefront-version header on every kind of
// response, pinning per request and per key, the admin API and command line for a key's version, and a
// test-only older version (registered only here) that renames a field and is deprecated.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import Fastify, { type LightMyRequestResponse } from "fastify";
import {
  type VersionedEvent,
  currentVersion,
  findVersion,
  registerVersion,
  renderEventForVersion,
  versionForStored,
} from "../../src/versioning/registry.ts";
import { installVersioning } from "../../src/versioning/versioning.hook.ts";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, freshDatabase, type Harness } from "../helpers/harness.ts";
import { SIGNED_PLUGIN, deliverSigned, installPlugin } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;

const CURRENT = "2026-11-23";
/** The test-only version: older than the current one, deprecated, with customers' `email` called `emailAddress`. */
const TEST_VERSION = "2026-06-01";
const DEPRECATED_AT = new Date("2026-11-23T00:00:00Z");
const SUNSET_AT = new Date("2027-11-23T00:00:00Z");

function registerTestVersion(): () => void {
  return registerVersion({
    version: TEST_VERSION,
    summary: "test only: customers' email was emailAddress, an invoice's totalInUsd was total",
    deprecatedAt: DEPRECATED_AT,
    sunsetAt: SUNSET_AT,
    responseRoutes: ["GET /api/{namespace}/customers"],
    transformResponse(route, body) {
      if (route.status !== 200) return body;
      const page = body as { data: { customers: Json[] } };
      for (const customer of page.data.customers) {
        customer.emailAddress = customer.email;
        delete customer.email;
      }
      return page;
    },
    transformEvent(event) {
      const invoice = event.data.invoice as Json | undefined;
      if (invoice !== undefined) {
        invoice.total = invoice.totalInUsd;
        delete invoice.totalInUsd;
      }
      return event;
    },
  });
}

const header = (r: LightMyRequestResponse, name: string) => r.headers[name] as string | undefined;

function expectVersion(r: LightMyRequestResponse, version: string, what: string): void {
  assert.equal(header(r, "storefront-version"), version, `${what}: storefront-version (HTTP ${r.statusCode})`);
}

function expectDeprecated(r: LightMyRequestResponse): void {
  assert.equal(header(r, "deprecation"), `@${DEPRECATED_AT.getTime() / 1000}`, "Deprecation: RFC 9745 @<epoch seconds>");
  assert.equal(header(r, "sunset"), "Tue, 23 Nov 2027 00:00:00 GMT", "Sunset: RFC 8594 HTTP-date");
}

function expectNotDeprecated(r: LightMyRequestResponse): void {
  assert.equal(header(r, "deprecation"), undefined);
  assert.equal(header(r, "sunset"), undefined);
}

describe("the version registry", () => {
  test("2026-11-23 is the current version and the only one the service ships", () => {
    assert.equal(currentVersion().version, CURRENT);
    assert.equal(currentVersion().chain.length, 0, "the current version has nothing to transform");
    assert.equal(findVersion(TEST_VERSION), null, "the test version exists only while a test registers it");
  });

  test("versions must be YYYY-MM-DD dates, registered once, with deprecation and sunset together", () => {
    assert.throws(() => registerVersion({ version: "v2", summary: "" }), /YYYY-MM-DD/);
    assert.throws(() => registerVersion({ version: "2026-13-45", summary: "" }), /YYYY-MM-DD/);
    assert.throws(() => registerVersion({ version: CURRENT, summary: "" }), /twice/);
    assert.throws(() => registerVersion({ version: "2026-01-01", summary: "", deprecatedAt: new Date() }), /together/);
  });
});

describe("events rendered for an endpoint's version", () => {
  const event = (): VersionedEvent => ({
    id: "evt_1",
    type: "invoice.completed",
    createdAt: "2026-11-23T10:00:00.000Z",
    data: { invoice: { id: "inv_1", totalInUsd: 49.99, status: "completed" } },
  });
  let unregister: () => void;
  before(() => {
    unregister = registerTestVersion();
  });
  after(() => unregister());

  test("the current version's event is the event itself, untouched", () => {
    const e = event();
    assert.equal(renderEventForVersion(CURRENT, e), e);
  });

  test("the test version's event has the renamed field; the original is not changed (other endpoints share it)", () => {
    const e = event();
    const rendered = renderEventForVersion(TEST_VERSION, e);
    assert.deepEqual(rendered, { ...event(), data: { invoice: { id: "inv_1", total: 49.99, status: "completed" } } });
    assert.deepEqual(e, event());
  });

  test("the feed's events pass through the version's event steps in the one hook (a stand-in feed route)", async () => {
    // The real feed (GET /api/{namespace}/events) comes from the events work; this route answers its shape.
    const app = Fastify({ logger: false });
    installVersioning(app, { apiNamespace: "shop" });
    app.get("/api/shop/events", async () => ({ data: [event(), event()], pagination: { limit: 2, nextCursor: "c" } }));
    app.get("/api/shop/events-nested", async () => ({ data: { events: [event()] }, pagination: { limit: 1, nextCursor: null } }));
    await app.ready();
    try {
      const current = await app.inject({ method: "GET", url: "/api/shop/events" });
      assert.deepEqual(current.json<{ data: VersionedEvent[] }>().data[0], event());
      const old = await app.inject({ method: "GET", url: "/api/shop/events", headers: { "storefront-version": TEST_VERSION } });
      const page = old.json<{ data: VersionedEvent[]; pagination: Json }>();
      assert.deepEqual(page.data.map((e) => e.data.invoice), [{ id: "inv_1", total: 49.99, status: "completed" }, { id: "inv_1", total: 49.99, status: "completed" }]);
      assert.deepEqual(page.pagination, { limit: 2, nextCursor: "c" });
      expectDeprecated(old);
      const other = await app.inject({ method: "GET", url: "/api/shop/events-nested", headers: { "storefront-version": TEST_VERSION } });
      assert.equal((other.json<{ data: { events: VersionedEvent[] } }>().data.events[0]!.data.invoice as Json).totalInUsd, 49.99, "another route is not the feed");
    } finally {
      await app.close();
    }
  });

  test("an endpoint remembering a retired version is sent the oldest version still served after it", () => {
    assert.equal(versionForStored("2026-01-01").version, TEST_VERSION);
    assert.equal((renderEventForVersion("2026-01-01", event()).data.invoice as Json).total, 49.99);
    assert.equal(versionForStored("2030-01-01").version, CURRENT, "nothing newer: the current version");
  });
});

for (const dialect of DIALECTS) {
  describe(`versioning over HTTP on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let unregister: () => void;
    let store: { id: string; key: string };
    before(async () => {
      unregister = registerTestVersion();
      h = await createHarness(dialect.name);
      store = await h.store();
      await h.customer(store.id, { email: "ada@example.com" });
    });
    after(async () => {
      unregister();
      await h?.close();
    });

    const createKey = async (body: Json = {}) => {
      const r = await h.admin("POST", `/api/admin/stores/${store.id}/keys`, body);
      expectStatus(r, 201);
      return r.json<{ id: string; key: string; version: string }>();
    };
    const patchKey = (keyId: string, payload: Json) =>
      h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/keys/${keyId}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload });
    const listedVersion = async (keyId: string) => {
      const r = await h.admin("GET", `/api/admin/stores/${store.id}/keys`);
      expectStatus(r, 200);
      return r.json<{ data: { id: string; version: string }[] }>().data.find((k) => k.id === keyId)?.version;
    };
    const firstCustomer = (r: LightMyRequestResponse) => r.json<{ data: { customers: Json[] } }>().data.customers[0]!;

    test("every kind of response carries storefront-version: lists, errors, 404s, webhook, admin, operations", async () => {
      const limited = await createKey({ scopes: ["invoices:read"] });
      await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
      const responses: [string, LightMyRequestResponse][] = [
        ["list 200", await h.get("/api/service/customers", store.key)],
        ["list 200 (invoices)", await h.get("/api/service/invoices", store.key)],
        ["list 400 unknown parameter", await h.get("/api/service/customers?nope=1", store.key)],
        ["list 401 no key", await h.get("/api/service/customers")],
        ["list 403 scope", await h.get("/api/service/customers", limited.key)],
        ["404 unmatched route", await h.get("/api/service/nothing-here")],
        ["400 undecodable URL", await h.get("/api/admin/stores/%zz/keys")],
        ["414 path parameter too long", await h.get(`/api/admin/stores/${"s".repeat(150)}/keys`)],
        ["webhook 200", await deliverSigned(h, store.id, { type: "other" })],
        ["webhook 404 unknown plugin", await deliverSigned(h, store.id, { type: "other" }, "missing")],
        ["admin 201", await h.admin("POST", "/api/admin/stores", { name: "another" })],
        ["admin 200", await h.admin("GET", "/api/admin/stores")],
        ["admin 400 bad body", await h.admin("POST", "/api/admin/stores", { name: "" })],
        ["admin 401", await h.app.inject({ method: "GET", url: "/api/admin/stores" })],
        ["admin 204", await h.admin("DELETE", `/api/admin/stores/${store.id}/keys/${limited.id}`)],
        ["admin 400 malformed JSON", await h.app.inject({ method: "POST", url: "/api/admin/stores", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, payload: "{" })],
        ["healthz", await h.get("/healthz")],
        ["readyz", await h.get("/readyz")],
        ["metrics", await h.get("/metrics")],
        ["openapi.json", await h.get("/openapi.json")],
        ["docs", await h.get("/docs/")],
      ];
      const statuses = responses.map(([, r]) => r.statusCode);
      assert.deepEqual(statuses, [200, 200, 400, 401, 403, 404, 400, 414, 200, 404, 201, 200, 400, 401, 204, 400, 200, 200, 200, 200, 200]);
      for (const [what, r] of responses) {
        expectVersion(r, CURRENT, what);
        expectNotDeprecated(r);
        assert.ok(r.headers["x-request-id"], `${what}: x-request-id`);
        if (r.statusCode >= 400) assert.equal(r.json<{ error: { requestId: string } }>().error.requestId, r.headers["x-request-id"], `${what}: envelope`);
      }
    });

    test("openapi.json: info.version is the current version; every operation documents the header and the 400", async () => {
      const doc = (await h.get("/openapi.json")).json<{
        info: { version: string };
        paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: { enum: string[] } }[]; responses: Record<string, { headers?: Json }> }>>;
      }>();
      assert.equal(doc.info.version, CURRENT);
      let operations = 0;
      for (const [url, item] of Object.entries(doc.paths)) {
        for (const [method, op] of Object.entries(item)) {
          operations++;
          const param = op.parameters?.find((p) => p.name === "storefront-version");
          assert.equal(param?.in, "header", `${method} ${url} documents the storefront-version request header`);
          assert.ok(param.schema.enum.includes(CURRENT));
          for (const [status, response] of Object.entries(op.responses)) {
            assert.ok(response.headers?.["storefront-version"], `${method} ${url} ${status} documents the response header`);
          }
          if (url !== "/metrics") assert.ok(op.responses["400"], `${method} ${url} documents 400 (unknown_version)`);
        }
      }
      assert.ok(operations > 15);
    });

    test("an unknown version is refused: 400 unknown_version naming the known versions, in the current version", async () => {
      for (const [url, key] of [
        ["/api/service/customers", store.key],
        ["/healthz", null],
        ["/api/admin/stores", null],
        ["/api/nothing-here", null],
      ] as const) {
        const r = await h.get(url, key, { "storefront-version": "2020-01-01" });
        expectStatus(r, 400);
        const { error } = r.json<{ error: { code: string; message: string; param: string; knownVersions: string[]; requestId: string } }>();
        assert.equal(error.code, "unknown_version", url);
        assert.equal(error.param, "storefront-version");
        assert.match(error.message, /"2020-01-01".*2026-11-23/);
        assert.ok(error.message.includes(TEST_VERSION), "every served version is named");
        assert.deepEqual(error.knownVersions, [CURRENT, TEST_VERSION], "newest first");
        assert.equal(error.requestId, r.headers["x-request-id"]);
        expectVersion(r, CURRENT, url);
      }
      for (const bad of ["", "latest", "2026-11-23, 2026-06-01", "x".repeat(500)]) {
        const r = await h.get("/api/service/customers", store.key, { "storefront-version": bad });
        expectStatus(r, 400);
        assert.equal(r.json<{ error: { code: string } }>().error.code, "unknown_version");
        assert.ok(r.body.length < 600, "a long value is not echoed in full");
      }
    });

    test("a key remembers the version current when it was created, and is answered in it", async () => {
      const before = await createKey();
      assert.equal(before.version, CURRENT);
      assert.equal(await listedVersion(before.id), CURRENT);
      // A newer, additive version ships: keys created from now on remember it; the older key keeps its own.
      const unregisterNewer = registerVersion({ version: "2027-03-01", summary: "test only: additive" });
      try {
        const later = await createKey();
        assert.equal(later.version, "2027-03-01");
        expectVersion(await h.get("/api/service/customers", before.key), CURRENT, "key created before");
        expectVersion(await h.get("/api/service/customers", later.key), "2027-03-01", "key created after");
        expectVersion(await h.get("/api/service/customers", later.key, { "storefront-version": CURRENT }), CURRENT, "pinned");
        expectVersion(await h.get("/healthz"), "2027-03-01", "no key: the current version");
      } finally {
        unregisterNewer();
      }
    });

    test("a key created under the test version is answered in it: field renamed, Deprecation and Sunset", async () => {
      const old = await createKey({ version: TEST_VERSION });
      assert.equal(old.version, TEST_VERSION);
      const r = await h.get("/api/service/customers", old.key);
      expectStatus(r, 200);
      expectVersion(r, TEST_VERSION, "key's version");
      expectDeprecated(r);
      const customer = firstCustomer(r);
      assert.equal(customer.emailAddress, "ada@example.com");
      assert.equal("email" in customer, false);
      assert.equal(Number(r.headers["content-length"]), Buffer.byteLength(r.body), "content-length of the reshaped body");

      // The request's pin wins over the key's version.
      const pinned = await h.get("/api/service/customers", old.key, { "storefront-version": CURRENT });
      expectVersion(pinned, CURRENT, "pinned");
      expectNotDeprecated(pinned);
      assert.equal(firstCustomer(pinned).email, "ada@example.com");

      // A route the version does not change is passed through as it is; errors carry the key's version too.
      const invoicesOld = await h.get("/api/service/invoices", old.key);
      expectDeprecated(invoicesOld);
      assert.equal(invoicesOld.body, (await h.get("/api/service/invoices", store.key)).body);
      const badQuery = await h.get("/api/service/customers?limit=0", old.key);
      expectStatus(badQuery, 400);
      expectVersion(badQuery, TEST_VERSION, "error under the key's version");
      expectDeprecated(badQuery);
    });

    test("a request pinned to the test version gets its shape whatever its key, and 404s carry its headers", async () => {
      const r = await h.get("/api/service/customers", store.key, { "storefront-version": ` ${TEST_VERSION} ` });
      expectVersion(r, TEST_VERSION, "pinned");
      expectDeprecated(r);
      assert.equal(firstCustomer(r).emailAddress, "ada@example.com");
      const missing = await h.get("/api/service/nothing-here", null, { "storefront-version": TEST_VERSION });
      expectStatus(missing, 404);
      expectVersion(missing, TEST_VERSION, "404");
      expectDeprecated(missing);
      assert.equal(missing.json<{ error: { code: string } }>().error.code, "not_found");
    });

    test("admin PATCH changes a key's version; unknown versions and keys are refused", async () => {
      const k = await createKey();
      const changed = await patchKey(k.id, { version: TEST_VERSION });
      expectStatus(changed, 200);
      assert.deepEqual(
        { id: changed.json<Json>().id, version: changed.json<Json>().version, key: changed.json<Json>().key },
        { id: k.id, version: TEST_VERSION, key: undefined },
        "the key itself is never shown again",
      );
      assert.equal(await listedVersion(k.id), TEST_VERSION);
      assert.equal(firstCustomer(await h.get("/api/service/customers", k.key)).emailAddress, "ada@example.com");

      const unknown = await patchKey(k.id, { version: "2019-01-01" });
      expectStatus(unknown, 400);
      assert.deepEqual(
        { code: unknown.json<{ error: Json }>().error.code, param: unknown.json<{ error: Json }>().error.param },
        { code: "unknown_version", param: "version" },
      );
      expectStatus(await patchKey(k.id, {}), 400);
      expectStatus(await patchKey(k.id, { version: CURRENT, scopes: [] }), 400);
      expectStatus(await patchKey("key_nope", { version: CURRENT }), 404);
      const other = await h.store("other");
      const foreign = await h.app.inject({
        method: "PATCH",
        url: `/api/admin/stores/${other.id}/keys/${k.id}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload: { version: CURRENT },
      });
      expectStatus(foreign, 404);
      assert.equal(await listedVersion(k.id), TEST_VERSION, "unchanged by the refused requests");
      const unauthenticated = await h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/keys/${k.id}`, payload: { version: CURRENT } });
      expectStatus(unauthenticated, 401);

      const bad = await h.admin("POST", `/api/admin/stores/${store.id}/keys`, { version: "2019-01-01" });
      expectStatus(bad, 400);
      assert.equal(bad.json<{ error: Json }>().error.code, "unknown_version");
    });

    test("a version whose step fails answers 500 internal_error without internals, not the wrong shape", async () => {
      const unregisterBroken = registerVersion({
        version: "2026-02-01",
        summary: "test only: a broken step",
        responseRoutes: ["GET /api/{namespace}/invoices"],
        transformResponse() {
          throw new Error("secret internals");
        },
      });
      try {
        const r = await h.get("/api/service/invoices", store.key, { "storefront-version": "2026-02-01" });
        expectStatus(r, 500);
        const { error } = r.json<{ error: { code: string; message: string; requestId: string } }>();
        assert.equal(error.code, "internal_error");
        assert.doesNotMatch(r.body, /secret internals/);
        assert.equal(error.requestId, r.headers["x-request-id"]);
        expectVersion(r, "2026-02-01", "broken version");
        // Its other routes are not touched by the broken step.
        expectStatus(await h.get("/api/service/customers", store.key, { "storefront-version": "2026-02-01" }), 200);
      } finally {
        unregisterBroken();
      }
    });

    test("a key whose version was retired is answered in the oldest version still served after it", async () => {
      const k = await createKey({ version: TEST_VERSION });
      unregister();
      try {
        const r = await h.get("/api/service/customers", k.key);
        expectStatus(r, 200);
        expectVersion(r, CURRENT, "retired version");
        expectNotDeprecated(r);
        assert.equal(firstCustomer(r).email, "ada@example.com");
      } finally {
        unregister = registerTestVersion();
      }
    });
  });
}

describe("the command line shows and changes a key's version", () => {
  const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/main.ts");
  const run = promisify(execFile);
  let db: { url: string; drop: () => Promise<void> };
  before(async () => {
    db = await freshDatabase("sqlite");
  });
  after(async () => {
    await db?.drop();
  });
  const cli = (...args: string[]) => run(process.execPath, [main, ...args], { env: { ...process.env, DATABASE_URL: db.url, LOG_LEVEL: "silent" } });

  test("keys create / list / set-version, and versions", async () => {
    const storeId = (JSON.parse((await cli("stores", "create", "cli store")).stdout) as { id: string }).id;
    const created = JSON.parse((await cli("keys", "create", "--store", storeId)).stdout) as { id: string; version: string };
    assert.equal(created.version, CURRENT);
    assert.match((await cli("keys", "list", "--store", storeId)).stdout, new RegExp(`${created.id}.*${CURRENT}`));
    const refused = await cli("keys", "set-version", "--store", storeId, "--key", created.id, "--api-version", "2019-01-01").then(
      () => null,
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(refused?.code, 1);
    assert.match(refused!.stderr, /unknown_version.*2026-11-23/);
    const same = JSON.parse((await cli("keys", "set-version", "--store", storeId, "--key", created.id, "--api-version", CURRENT)).stdout) as Json;
    assert.equal(same.version, CURRENT);
    assert.match((await cli("versions")).stdout, /2026-11-23\s+yes/);
  });
});
