// Database faults never end the process: PostgreSQL connections terminated under load (a failover, a
// pooler restart) are answered 503 database_unavailable with Retry-After while they last, and the service
// recovers by itself. /readyz tells an orchestrator the truth: 503 while the schema is not migrated.
import assert from "node:assert/strict";
import { randomBytes, createHmac } from "node:crypto";
import { describe, test } from "node:test";
import pg from "pg";
import { buildApp } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";
import { createServices } from "../../../src/services.ts";
import { randomBase32 } from "../../../src/lib/ids.ts";
import { ADMIN_TOKEN, DIALECTS, PG_ADMIN_URL, freshDatabase, pgSkip } from "../../helpers/harness.ts";
import { startServer } from "../../helpers/server.ts";

for (const dialect of DIALECTS) {
  test(`/readyz is 503 on a database whose schema is not migrated, 200 once it is (${dialect.name})`, { skip: dialect.skip }, async () => {
    const database = await freshDatabase(dialect.name);
    const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") });
    const services = await createServices(config, { migrate: false });
    const app = await buildApp(services, { logger: false });
    try {
      const before = await app.inject({ method: "GET", url: "/readyz" });
      assert.equal(before.statusCode, 503, before.body);
      assert.match(before.json<{ status: string }>().status, /not migrated/);
      await services.db.migrate();
      const afterwards = await app.inject({ method: "GET", url: "/readyz" });
      assert.equal(afterwards.statusCode, 200, afterwards.body);
    } finally {
      await app.close();
      await services.close();
      await database.drop();
    }
  });
}

describe("PostgreSQL connections terminated under load", { skip: pgSkip }, () => {
  test("the process survives 40 terminations 200 ms apart, answers 503 database_unavailable meanwhile (never 500), and recovers", async () => {
    const database = await freshDatabase("postgres");
    const appName = `sf_fault_${randomBase32(8)}`;
    const url = new URL(database.url);
    url.searchParams.set("application_name", appName);
    const secretsKey = randomBytes(32).toString("hex");
    const server = await startServer({ DATABASE_URL: url.toString(), ADMIN_TOKEN, SECRETS_KEY: secretsKey, WEBHOOK_RATE_LIMIT_MAX: "1000000", RATE_LIMIT_MAX: "1000000" });
    const killer = new pg.Client({ connectionString: PG_ADMIN_URL });
    await killer.connect();
    let running = true;
    try {
      const admin = (method: string, path: string, body?: unknown) =>
        fetch(`${server.url}/api/admin${path}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const store = (await (await admin("POST", "/stores", { name: "Faults" })).json()) as { id: string };
      const key = ((await (await admin("POST", `/stores/${store.id}/keys`, {})).json()) as { key: string }).key;
      const customer = (await (await admin("POST", `/stores/${store.id}/customers`, { email: "f@example.com" })).json()) as { id: string };
      const source = `
        if request.headers["x-signature"] ~= hmacShaSign(secrets.key, request.body, "sha256") then reject("bad signature") end
        local e = request.json
        if e.type == "paid" then return { status = "pushInvoice", invoiceId = e.invoiceId, eventId = e.id } end
        return { status = "ignore" }`;
      assert.equal((await admin("PUT", `/stores/${store.id}/plugins/pay`, { source, secrets: { key: "fault-secret-value" } })).status, 201);
      const webhook = (event: Record<string, unknown>) => {
        const body = JSON.stringify(event);
        return fetch(`${server.url}/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-signature": createHmac("sha256", "fault-secret-value").update(body).digest("hex") },
          body,
        });
      };

      const statuses = new Map<number, number>();
      const bad: string[] = [];
      const load = async (i: number) => {
        for (let n = 0; running; n++) {
          try {
            const r = n % 2 === 0 ? await webhook({ type: "noise", id: `e${i}-${n}` }) : await fetch(`${server.url}/api/service/customers?limit=5`, { headers: { authorization: key } });
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
            const text = await r.text();
            if (r.status === 503) {
              if (!text.includes('"database_unavailable"') || r.headers.get("retry-after") === null) bad.push(`503 without the envelope or Retry-After: ${text}`);
            } else if (r.status !== 200) {
              bad.push(`${r.status}: ${text.slice(0, 200)}`);
            }
          } catch (err) {
            bad.push(`request failed: ${String(err)}`);
          }
        }
      };
      const loaders = [0, 1, 2, 3].map(load);
      let terminated = 0;
      for (let round = 0; round < 40; round++) {
        await new Promise((r) => setTimeout(r, 200));
        const { rowCount } = await killer.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1", [appName]);
        terminated += rowCount ?? 0;
        assert.equal(server.child.exitCode, null, `the service exited after ${round} rounds: ${server.output().slice(-2000)}`);
      }
      running = false;
      await Promise.all(loaders);
      assert.equal(server.child.exitCode, null, "the service is still running");
      assert.ok(terminated >= 40, `connections were terminated (${terminated})`);
      // A 500's logged error (by its request id), so that a failure here says what broke.
      const logged = bad.map((b) => /"requestId":"([^"]+)"/.exec(b)?.[1]).filter((id) => id !== undefined).flatMap((id) => server.output().split("\n").filter((line) => line.includes(id)));
      assert.deepEqual(bad, [], `every answer was 200 or 503 database_unavailable with Retry-After; logged: ${logged.join("\n").slice(0, 4000)}`);
      assert.ok((statuses.get(200) ?? 0) > 0, "requests were served between terminations");

      // Recovered. Connections killed in the last round may still fail one request each (503, which clients
      // and providers retry, as here): within a few retries the service answers from fresh connections.
      const retried = async (send: () => Promise<Response>): Promise<Response> => {
        let r = await send();
        for (let attempt = 0; attempt < 20 && r.status === 503; attempt++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          r = await send();
        }
        return r;
      };
      const created = await retried(() => admin("POST", `/stores/${store.id}/invoices`, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 9 }] }));
      assert.equal(created.status, 201, await created.clone().text());
      const invoice = (await created.json()) as { id: string };
      const paid = await retried(() => webhook({ type: "paid", id: "evt_after", invoiceId: invoice.id }));
      assert.equal(paid.status, 200, await paid.text());
      const listed = await retried(() => fetch(`${server.url}/api/service/invoices?id=${invoice.id}`, { headers: { authorization: key } }));
      const list = (await listed.json()) as { data: { invoices: { status: string }[] } };
      assert.equal(list.data.invoices[0]?.status, "completed");
      assert.equal((await retried(() => fetch(`${server.url}/readyz`))).status, 200);
    } finally {
      running = false;
      await killer.end();
      await server.kill9();
      await database.drop();
    }
  });
});

describe("a PostgreSQL database dropped under a running service", { skip: pgSkip }, () => {
  test("is a database fault: 503 database_unavailable with Retry-After on every route that needs it, /readyz 503 'database unavailable', never 500", async () => {
    const name = `sf_dropped_${randomBase32(8).toLowerCase()}`;
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    const url = new URL(PG_ADMIN_URL);
    url.pathname = `/${name}`;
    // READ_THREADS=1: the read API's own connections (postgres.js) meet the missing database too.
    const config = loadConfig({ DATABASE_URL: url.toString(), ADMIN_TOKEN, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex"), READ_THREADS: "1", API_KEY_CACHE_SECONDS: "0" });
    const services = await createServices(config);
    const app = await buildApp(services, { logger: false });
    try {
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const store = (await app.inject({ method: "POST", url: "/api/admin/stores", headers: auth, payload: { name: "Doomed" } })).json<{ id: string }>();
      const key = (await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/keys`, headers: auth, payload: {} })).json<{ key: string }>().key;
      assert.equal((await app.inject({ method: "GET", url: "/api/service/customers", headers: { authorization: key } })).statusCode, 200);

      // Terminates this test's own connections to it (and only those: nobody else uses this database).
      await admin.query(`drop database ${name} with (force)`);

      const requests = [
        () => app.inject({ method: "GET", url: "/api/admin/stores", headers: auth }),
        () => app.inject({ method: "POST", url: "/api/admin/stores", headers: auth, payload: { name: "After" } }),
        () => app.inject({ method: "GET", url: "/api/service/customers", headers: { authorization: key } }),
        () => app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, payload: "{}", headers: { "content-type": "application/json" } }),
      ];
      for (const send of requests) {
        // The first request on a terminated pooled connection may meet it closing; every answer must be 503.
        for (let i = 0; i < 3; i++) {
          const r = await send();
          assert.equal(r.statusCode, 503, r.body);
          assert.equal(r.json<{ error: { code: string } }>().error.code, "database_unavailable");
          assert.ok(Number(r.headers["retry-after"]) > 0);
        }
      }
      const ready = await app.inject({ method: "GET", url: "/readyz" });
      assert.equal(ready.statusCode, 503);
      assert.equal(ready.json<{ status: string }>().status, "database unavailable", "not 'schema not migrated': the database itself is gone");
    } finally {
      await app.close();
      await services.close();
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });
});
