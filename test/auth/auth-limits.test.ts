// Failed sign-in attempts are limited per client address and counted before the credential is checked,
// on SQLite and PostgreSQL: parallel guesses cannot outrun the limit (with a limit of 5, at most 5 are
// checked), a correct credential does not spend the budget, and each kind of credential has its own
// budget, so wrong API keys from a shared address (a proxy's) lock out neither the admin token nor
// console sign-in, nor an API key this process has seen succeed.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { LightMyRequestResponse } from "fastify";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

const PASSWORD = "correct horse battery";
const LIMIT = 5;
const HOST = "console.test:3000";

const tally = (responses: LightMyRequestResponse[]) => {
  const out: Record<number, number> = {};
  for (const r of responses) out[r.statusCode] = (out[r.statusCode] ?? 0) + 1;
  return out;
};

for (const { name: dialect, skip } of DIALECTS) {
  describe(`failed sign-ins counted before the check on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string; key: string };
    let address = 0;
    /** A fresh client address per test: budgets are per address. */
    const nextAddress = () => `198.51.100.${++address}`;
    before(async () => {
      h = await createHarness(dialect, { AUTH_FAILURE_LIMIT_MAX: String(LIMIT) });
      store = await h.store();
      await h.services.console.addUser("ann@example.com", PASSWORD, [store.id]);
    });
    after(async () => {
      await h?.close();
    });

    const consoleSignIn = (ip: string, body: Record<string, string>) =>
      h.app.inject({ method: "POST", url: "/console/api/session", headers: { host: HOST }, payload: body, remoteAddress: ip });
    const apiKey = (ip: string, key: string) => h.app.inject({ method: "GET", url: "/api/service/customers", headers: { authorization: key }, remoteAddress: ip });
    const adminToken = (ip: string, token: string) => h.app.inject({ method: "GET", url: "/api/admin/stores", headers: { authorization: `Bearer ${token}` }, remoteAddress: ip });

    test("40 parallel wrong console passwords with a limit of 5: 5 are checked (401), 35 refused unchecked (429)", async () => {
      const ip = nextAddress();
      const answers = await Promise.all(Array.from({ length: 40 }, () => consoleSignIn(ip, { email: "ann@example.com", password: "wrong password!" })));
      assert.deepEqual(tally(answers), { 401: LIMIT, 429: 40 - LIMIT });
      const refused = answers.find((r) => r.statusCode === 429)!;
      assert.ok(Number(refused.headers["retry-after"]) > 0);
      expectStatus(await consoleSignIn(ip, { email: "ann@example.com", password: PASSWORD }), 429);
    });

    test("200 parallel API key guesses and 100 parallel admin tokens: 5 of each checked", async () => {
      const ip = nextAddress();
      const keys = await Promise.all(Array.from({ length: 200 }, (_, i) => apiKey(ip, `sk_guess_${i}_${"x".repeat(40)}`)));
      assert.deepEqual(tally(keys), { 401: LIMIT, 429: 200 - LIMIT });
      const tokens = await Promise.all(Array.from({ length: 100 }, (_, i) => adminToken(ip, `wrong-admin-token-${i}-0123456789`)));
      assert.deepEqual(tally(tokens), { 401: LIMIT, 429: 100 - LIMIT });
    });

    test("correct credentials do not spend the budget: 12 good sign-ins, keys and tokens in a row all pass", async () => {
      const ip = nextAddress();
      for (let i = 0; i < 12; i++) {
        expectStatus(await consoleSignIn(ip, { email: "ann@example.com", password: PASSWORD }), 200);
        expectStatus(await consoleSignIn(ip, { token: ADMIN_TOKEN }), 200);
        expectStatus(await apiKey(ip, store.key), 200);
        expectStatus(await adminToken(ip, ADMIN_TOKEN), 200);
      }
    });

    test("30 wrong API keys from one address lock out neither the admin token nor console sign-in, nor a key seen to succeed", async () => {
      const ip = nextAddress();
      expectStatus(await apiKey(ip, store.key), 200);
      const fresh = await h.store("Another");
      for (let i = 0; i < 30; i++) await apiKey(ip, `sk_guess_${i}_${"y".repeat(40)}`);
      expectStatus(await apiKey(ip, "sk_one_more_guess_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"), 429);
      expectStatus(await apiKey(ip, store.key), 200);
      expectStatus(await adminToken(ip, ADMIN_TOKEN), 200);
      expectStatus(await consoleSignIn(ip, { email: "ann@example.com", password: PASSWORD }), 200);
      expectStatus(await consoleSignIn(ip, { token: ADMIN_TOKEN }), 200);
      // A key this process has not seen succeed waits like a guess: from this address it cannot be told from one.
      expectStatus(await apiKey(ip, fresh.key), 429);
      expectStatus(await apiKey(nextAddress(), fresh.key), 200);
    });

    test("a request without credentials, or with an ended console session, is not a guess", async () => {
      const ip = nextAddress();
      for (let i = 0; i < 10; i++) {
        expectStatus(await h.app.inject({ method: "GET", url: "/api/service/customers", remoteAddress: ip }), 401);
        expectStatus(await h.app.inject({ method: "GET", url: "/api/admin/stores", headers: { cookie: "storefront_session=ended" }, remoteAddress: ip }), 401);
      }
      expectStatus(await apiKey(ip, `sk_first_real_guess_${"q".repeat(40)}`), 401);
    });
  });
}
