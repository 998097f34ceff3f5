// A console session opened with the admin token is bound to that token, on SQLite and PostgreSQL: once the
// service runs with another ADMIN_TOKEN (rotated) or none (the admin API switched off), the session is
// over, for the console's own API and for the admin API it calls, writes included. Sessions of console
// logins do not depend on the token.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { createServices, type Services } from "../../src/services.ts";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

const HOST = "console.test:3000";
const PASSWORD = "correct horse battery";

async function signIn(app: FastifyInstance, body: Record<string, string>) {
  const r = await app.inject({ method: "POST", url: "/console/api/session", headers: { host: HOST }, payload: body });
  expectStatus(r, 200);
  const cookie = /storefront_session=([^;]*)/.exec(String(r.headers["set-cookie"]))![1]!;
  return { cookie, csrf: r.json<{ csrfToken: string }>().csrfToken };
}

/** What a signed-in browser can still do: read its session, list stores, create one (a write). */
async function reach(app: FastifyInstance, s: { cookie: string; csrf: string }): Promise<number[]> {
  const headers = { host: HOST, cookie: `storefront_session=${s.cookie}` };
  const results: LightMyRequestResponse[] = [
    await app.inject({ method: "GET", url: "/console/api/session", headers }),
    await app.inject({ method: "GET", url: "/api/admin/stores", headers }),
    await app.inject({ method: "POST", url: "/api/admin/stores", headers: { ...headers, "x-csrf-token": s.csrf, origin: `http://${HOST}` }, payload: { name: "via console" } }),
  ];
  return results.map((r) => r.statusCode);
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`admin-token console sessions bound to the token on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string };
    const others: { app: FastifyInstance; services: Services }[] = [];
    before(async () => {
      h = await createHarness(dialect);
      store = await h.store();
      await h.services.console.addUser("ann@example.com", PASSWORD, [store.id]);
    });
    after(async () => {
      for (const o of others) {
        await o.app.close();
        await o.services.close();
      }
      await h?.close();
    });

    /** The same database served by a process started with another ADMIN_TOKEN (or none). */
    async function restartedWith(adminToken: string | null) {
      const env: Record<string, string> = { DATABASE_URL: h.databaseUrl, LOG_LEVEL: "silent", SECRETS_KEY: h.config.secretsKey! };
      if (adminToken !== null) env.ADMIN_TOKEN = adminToken;
      const services = await createServices(loadConfig(env), { now: h.clock.now });
      const app = await buildApp(services, { logger: false });
      others.push({ app, services });
      return app;
    }

    test("a session keeps working while the token that opened it is the service's token", async () => {
      const s = await signIn(h.app, { token: ADMIN_TOKEN });
      assert.deepEqual(await reach(h.app, s), [200, 200, 201]);
      assert.deepEqual(await reach(await restartedWith(ADMIN_TOKEN), s), [200, 200, 201], "a restart with the same token keeps it");
    });

    test("a rotated ADMIN_TOKEN ends it: 401 everywhere, writes included", async () => {
      const s = await signIn(h.app, { token: ADMIN_TOKEN });
      const rotated = await restartedWith(`rotated-${randomBytes(12).toString("hex")}`);
      assert.deepEqual(await reach(rotated, s), [401, 401, 401]);
    });

    test("a removed ADMIN_TOKEN (admin API off) ends it: the console can no longer create stores", async () => {
      const s = await signIn(h.app, { token: ADMIN_TOKEN });
      const off = await restartedWith(null);
      const before = (await h.services.stores.listStores()).length;
      assert.deepEqual(await reach(off, s), [401, 401, 401]);
      assert.equal((await h.services.stores.listStores()).length, before, "nothing created");
    });

    test("a console login's session does not depend on the admin token", async () => {
      const s = await signIn(h.app, { email: "ann@example.com", password: PASSWORD });
      const rotated = await restartedWith(`rotated-${randomBytes(12).toString("hex")}`);
      const r = await rotated.inject({ method: "GET", url: "/console/api/session", headers: { cookie: `storefront_session=${s.cookie}` } });
      expectStatus(r, 200);
      assert.equal(r.json<{ kind: string }>().kind, "user");
    });
  });
}
