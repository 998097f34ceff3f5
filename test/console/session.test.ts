// The console's HTTP side through app.inject on a real SQLite file: signing in (admin token, login,
// wrong password, the sign-in limit), the cookie's flags, CSRF on every write, idle and absolute expiry,
// a login kept to its own stores, and the assets (compressed, immutable, CSP on every response).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { LightMyRequestResponse } from "fastify";
import { CONSOLE_CSP } from "../../src/console/console.routes.ts";
import { jsonOf, runCli } from "../helpers/cli.ts";
import { ADMIN_TOKEN, createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";

const HOST = "console.test:3000";
const ORIGIN = `http://${HOST}`;
const PASSWORD = "correct horse battery";

const cookieOf = (r: LightMyRequestResponse) => {
  const header = r.headers["set-cookie"];
  const line = Array.isArray(header) ? header[0]! : String(header);
  return { line, value: /storefront_session=([^;]*)/.exec(line)![1]! };
};
const code = (r: LightMyRequestResponse) => r.json<{ error: { code: string } }>().error.code;

async function signIn(h: Harness, body: Record<string, string>, headers: Record<string, string> = {}) {
  const r = await h.app.inject({ method: "POST", url: "/console/api/session", headers: { host: HOST, ...headers }, payload: body });
  return r;
}

/** A signed-in browser: its cookie and CSRF token on every request. */
async function browser(h: Harness, body: Record<string, string>) {
  const r = await signIn(h, body);
  expectStatus(r, 200);
  const cookie = cookieOf(r).value;
  const csrf = r.json<{ csrfToken: string }>().csrfToken;
  return {
    cookie,
    csrf,
    request: (method: "GET" | "POST" | "PUT" | "DELETE", url: string, payload?: unknown, headers: Record<string, string> = {}) =>
      h.app.inject({
        method,
        url,
        headers: { host: HOST, cookie: `other=1; storefront_session=${cookie}`, ...(method === "GET" ? {} : { "x-csrf-token": csrf, origin: ORIGIN }), ...headers },
        ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
      }),
  };
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`console sessions on ${dialect}`, { skip }, () => {
    let h: Harness;
    let mine: { id: string };
    let theirs: { id: string };
    before(async () => {
      h = await createHarness(dialect, { AUTH_FAILURE_LIMIT_MAX: "5", CONSOLE_SESSION_IDLE_MINUTES: "60" });
      mine = await h.store("Mine");
      theirs = await h.store("Theirs");
      await h.services.console.addUser("Ann@Example.com", PASSWORD, [mine.id]);
    });
    after(() => h.close());

    test("the admin token signs in: a session for every store, an HttpOnly SameSite=Strict cookie without Secure over plain HTTP", async () => {
      const r = await signIn(h, { token: ADMIN_TOKEN });
      expectStatus(r, 200);
      const body = r.json<{ kind: string; stores: null; csrfToken: string }>();
      assert.equal(body.kind, "admin");
      assert.equal(body.stores, null);
      assert.ok(body.csrfToken.length >= 40);
      const { line, value } = cookieOf(r);
      assert.match(line, /; HttpOnly/);
      assert.match(line, /; SameSite=Strict/);
      assert.match(line, /; Path=\//);
      assert.doesNotMatch(line, /Secure/);
      const session = await h.app.inject({ method: "GET", url: "/console/api/session", headers: { cookie: `storefront_session=${value}` } });
      expectStatus(session, 200);
      assert.equal(session.json<{ csrfToken: string }>().csrfToken, body.csrfToken);
      const stores = await h.app.inject({ method: "GET", url: "/api/admin/stores", headers: { cookie: `storefront_session=${value}` } });
      assert.equal(stores.json<{ data: unknown[] }>().data.length, 2);
    });

    test("a login signs in with its e-mail (any case) and password and sees its stores only", async () => {
      const r = await signIn(h, { email: "ann@example.COM", password: PASSWORD });
      expectStatus(r, 200);
      assert.deepEqual(r.json<{ kind: string; email: string; stores: string[] }>().stores, [mine.id]);
      assert.equal(r.json<{ email: string }>().email, "ann@example.com");
    });

    test("a wrong password, an unknown e-mail and a wrong token are 401, and count against the address's sign-in limit", async () => {
      const ip = { "x-forwarded-for": "203.0.113.9" };
      const limited = await createHarness(dialect, { AUTH_FAILURE_LIMIT_MAX: "3" });
      try {
        const store = await limited.store();
        await limited.services.console.addUser("bob@example.com", PASSWORD, [store.id]);
        const tries: Record<string, string>[] = [
          { email: "bob@example.com", password: "wrong password!" },
          { email: "nobody@example.com", password: PASSWORD },
          { token: "not-the-admin-token-at-all" },
        ];
        for (const body of tries) {
          const r = await signIn(limited, body, ip);
          expectStatus(r, 401);
          assert.equal(code(r), "unauthorized");
          assert.equal(r.headers["set-cookie"], undefined);
        }
        const blocked = await signIn(limited, { email: "bob@example.com", password: PASSWORD }, ip);
        expectStatus(blocked, 429);
        assert.ok(Number(blocked.headers["retry-after"]) > 0);
      } finally {
        await limited.close();
      }
    });

    test("the cookie is Secure when the request came over TLS (x-forwarded-proto from a trusted proxy)", async () => {
      const proxied = await createHarness(dialect, { TRUST_PROXY: "loopback" });
      try {
        const r = await proxied.app.inject({ method: "POST", url: "/console/api/session", headers: { "x-forwarded-proto": "https" }, payload: { token: ADMIN_TOKEN } });
        expectStatus(r, 200);
        assert.match(cookieOf(r).line, /; Secure/);
        const plain = await proxied.app.inject({ method: "POST", url: "/console/api/session", payload: { token: ADMIN_TOKEN } });
        assert.doesNotMatch(cookieOf(plain).line, /Secure/);
      } finally {
        await proxied.close();
      }
    });

    test("a write without the CSRF token, with a wrong one, or from another origin is 403 csrf_failed; with both it goes through", async () => {
      const b = await browser(h, { token: ADMIN_TOKEN });
      const create = (headers: Record<string, string>) =>
        h.app.inject({ method: "POST", url: "/api/admin/stores", headers: { host: HOST, cookie: `storefront_session=${b.cookie}`, ...headers }, payload: { name: "via console" } });
      const attempts: Record<string, string>[] = [{}, { "x-csrf-token": "x".repeat(b.csrf.length) }, { "x-csrf-token": "short" }, { "x-csrf-token": b.csrf, origin: "https://evil.example" }, { "x-csrf-token": b.csrf, origin: "https://console.test:3000" }];
      for (const headers of attempts) {
        const r = await create(headers);
        expectStatus(r, 403);
        assert.equal(code(r), "csrf_failed", JSON.stringify(headers));
      }
      expectStatus(await create({ "x-csrf-token": b.csrf, origin: ORIGIN }), 201);
      expectStatus(await create({ "x-csrf-token": b.csrf }), 201); // no Origin (some clients omit it): the token suffices
      // Sign-in from another origin is refused too (login CSRF).
      const cross = await signIn(h, { token: ADMIN_TOKEN }, { origin: "https://evil.example" });
      expectStatus(cross, 403);
      // Sign-out is a write.
      const out = await h.app.inject({ method: "DELETE", url: "/console/api/session", headers: { host: HOST, cookie: `storefront_session=${b.cookie}` } });
      expectStatus(out, 403);
      const signedOut = await b.request("DELETE", "/console/api/session");
      expectStatus(signedOut, 204);
      assert.match(cookieOf(signedOut).line, /Max-Age=0/);
      expectStatus(await b.request("GET", "/console/api/session"), 401);
    });

    test("the bearer token path is unchanged: no CSRF token needed, a wrong token is 401", async () => {
      expectStatus(await h.admin("POST", "/api/admin/stores", { name: "by token" }), 201);
      const wrong = await h.app.inject({ method: "GET", url: "/api/admin/stores", headers: { authorization: "Bearer wrong-token-wrong-token" } });
      expectStatus(wrong, 401);
      const none = await h.app.inject({ method: "GET", url: "/api/admin/stores" });
      expectStatus(none, 401);
    });

    test("a session ends after CONSOLE_SESSION_IDLE_MINUTES without a request, and 12 hours after sign-in in any case", async () => {
      const idle = await browser(h, { token: ADMIN_TOKEN });
      h.clock.advance(59 * 60_000);
      expectStatus(await idle.request("GET", "/console/api/session"), 200);
      h.clock.advance(59 * 60_000); // active 59 minutes ago: still alive
      expectStatus(await idle.request("GET", "/api/admin/stores"), 200);
      h.clock.advance(60 * 60_000 + 1);
      const ended = await idle.request("GET", "/api/admin/stores");
      expectStatus(ended, 401);
      expectStatus(await idle.request("GET", "/console/api/session"), 401);

      const busy = await browser(h, { email: "ann@example.com", password: PASSWORD });
      for (let i = 0; i < 13; i++) {
        h.clock.advance(55 * 60_000);
        expectStatus(await busy.request("GET", "/console/api/session"), 200);
      }
      h.clock.advance(55 * 60_000); // 12 h 50 min after sign-in, 55 min after the last request
      expectStatus(await busy.request("GET", "/console/api/session"), 401);
    });

    test("a login cannot see or touch another store (404 as if it did not exist) nor store-less operations", async () => {
      const ann = await browser(h, { email: "ann@example.com", password: PASSWORD });
      const stores = await ann.request("GET", "/api/admin/stores");
      expectStatus(stores, 200);
      assert.deepEqual(
        stores.json<{ data: { id: string }[] }>().data.map((s) => s.id),
        [mine.id],
      );
      expectStatus(await ann.request("GET", `/api/admin/stores/${mine.id}/plugins`), 200);
      for (const [method, url] of [
        ["GET", `/api/admin/stores/${theirs.id}/plugins`],
        ["GET", `/api/admin/stores/${theirs.id}/deliveries`],
        ["PUT", `/api/admin/stores/${theirs.id}/plugins/pay`],
        ["GET", `/api/admin/stores/st_doesnotexist/plugins`],
      ] as const) {
        const r = await ann.request(method, url, method === "PUT" ? { catalog: "generic-hmac" } : undefined);
        expectStatus(r, 404);
        assert.equal(code(r), "store_not_found");
      }
      const create = await ann.request("POST", "/api/admin/stores", { name: "not allowed" });
      expectStatus(create, 403);
      expectStatus(await ann.request("GET", "/api/admin/catalog"), 200);
      // Removing the login ends its sessions at once.
      await h.services.console.addUser("tmp@example.com", PASSWORD, [mine.id]);
      const tmp = await browser(h, { email: "tmp@example.com", password: PASSWORD });
      await h.services.console.removeUser("tmp@example.com");
      expectStatus(await tmp.request("GET", `/api/admin/stores/${mine.id}/plugins`), 401);
    });
  });
}

describe("console pages and assets", () => {
  let h: Harness;
  before(async () => {
    h = await createHarness("sqlite");
  });
  after(() => h.close());

  test("the HTML shell answers every client route, is never cached, and carries the CSP and the other security headers", async () => {
    for (const url of ["/console", "/console/", "/console/signin", "/console/stores/st_x/plugins/pay"]) {
      const r = await h.app.inject({ method: "GET", url });
      expectStatus(r, 200);
      assert.match(String(r.headers["content-type"]), /text\/html/);
      assert.equal(r.headers["cache-control"], "no-store");
      assert.equal(r.headers["content-security-policy"], CONSOLE_CSP);
      assert.equal(r.headers["x-content-type-options"], "nosniff");
      assert.equal(r.headers["referrer-policy"], "no-referrer");
      assert.doesNotMatch(r.body, /<script>|style=|onload=/, "no inline script or style");
      assert.match(r.body, /<script type="module" src="\/console\/assets\/app-[A-Z0-9]+\.js"><\/script>/);
    }
    const api404 = await h.app.inject({ method: "GET", url: "/console/api/nothing" });
    expectStatus(api404, 404);
    assert.equal(api404.headers["content-security-policy"], CONSOLE_CSP);
    const unauth = await h.app.inject({ method: "GET", url: "/console/api/session" });
    expectStatus(unauth, 401);
    assert.equal(unauth.headers["content-security-policy"], CONSOLE_CSP);
  });

  test("console paths answered outside the console's routes (a bad URL, a method it has no route for) carry the CSP too", async () => {
    const cases: [string, string, number][] = [
      ["GET", "/console/%", 400],
      ["GET", "/console/assets/%E0%A4%A", 400],
      ["PUT", "/console", 404],
      ["POST", "/console/stores/st_x", 404],
      ["DELETE", "/console/assets/app.js", 404],
      ["GET", "/console/api/stores/%/deliveries/stream", 400],
    ];
    for (const [method, url, status] of cases) {
      const r = await h.app.inject({ method: method as "GET", url });
      assert.equal(r.statusCode, status, `${method} ${url}`);
      assert.equal(r.headers["content-security-policy"], CONSOLE_CSP, `${method} ${url}`);
      assert.equal(r.headers["x-content-type-options"], "nosniff", `${method} ${url}`);
    }
    const elsewhere = await h.app.inject({ method: "PUT", url: "/consoles" });
    assert.equal(elsewhere.headers["content-security-policy"], undefined, "only the console's own paths");
  });

  test("assets are named by content hash, served brotli or gzip compressed, immutable for a year, with an ETag", async () => {
    const shell = await h.app.inject({ method: "GET", url: "/console" });
    const names = [...shell.body.matchAll(/\/console\/assets\/(app-[A-Z0-9]+\.(?:js|css))/g)].map((m) => m[1]!);
    assert.equal(names.length, 2);
    for (const name of names) {
      const br = await h.app.inject({ method: "GET", url: `/console/assets/${name}`, headers: { "accept-encoding": "gzip, deflate, br" } });
      expectStatus(br, 200);
      assert.equal(br.headers["content-encoding"], "br");
      assert.equal(br.headers["cache-control"], "public, max-age=31536000, immutable");
      assert.equal(br.headers["vary"], "Accept-Encoding");
      assert.equal(br.headers["content-security-policy"], CONSOLE_CSP);
      assert.match(String(br.headers["content-type"]), name.endsWith(".js") ? /text\/javascript/ : /text\/css/);
      const gzip = await h.app.inject({ method: "GET", url: `/console/assets/${name}`, headers: { "accept-encoding": "gzip" } });
      assert.equal(gzip.headers["content-encoding"], "gzip");
      const plain = await h.app.inject({ method: "GET", url: `/console/assets/${name}`, headers: { "accept-encoding": "br;q=0" } });
      assert.equal(plain.headers["content-encoding"], undefined);
      assert.ok(br.rawPayload.length < plain.rawPayload.length);
      const etag = String(br.headers["etag"]);
      const cached = await h.app.inject({ method: "GET", url: `/console/assets/${name}`, headers: { "if-none-match": etag } });
      expectStatus(cached, 304);
    }
    expectStatus(await h.app.inject({ method: "GET", url: "/console/assets/app-NOPE.js" }), 404);
  });
});

describe("storefront console users", () => {
  test("add reads the password from standard input, list shows the login and its stores, remove deletes it", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-console-cli-"));
    const env = { DATABASE_URL: `sqlite:${path.join(dir, "cli.db")}`, SECRETS_KEY: randomBytes(32).toString("hex") };
    try {
      const store = jsonOf<{ id: string }>(await runCli(["stores", "create", "CLI shop"], { env }));
      const added = jsonOf<{ email: string; stores: string[] }>(await runCli(["console", "users", "add", "Cli@Example.com", "--store", store.id, "--json"], { env, input: `${PASSWORD}\n` }));
      assert.deepEqual({ email: added.email, stores: added.stores }, { email: "cli@example.com", stores: [store.id] });
      const short = await runCli(["console", "users", "add", "b@example.com", "--store", store.id], { env, input: "short\n" });
      assert.equal(short.code, 1);
      assert.match(short.stderr, /at least 10 characters/);
      const unknownStore = await runCli(["console", "users", "add", "c@example.com", "--store", "st_nope"], { env, input: `${PASSWORD}\n` });
      assert.match(unknownStore.stderr, /store_not_found/);
      const listed = jsonOf<{ data: { email: string; stores: string[] }[] }>(await runCli(["console", "users", "list", "--json"], { env }));
      assert.deepEqual(listed.data.map((u) => u.email), ["cli@example.com"]);
      assert.doesNotMatch(JSON.stringify(listed), /scrypt|password/i, "no hash is shown");
      jsonOf(await runCli(["console", "users", "remove", "cli@example.com", "--json"], { env }));
      assert.deepEqual(jsonOf<{ data: unknown[] }>(await runCli(["console", "users", "list", "--json"], { env })).data, []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
