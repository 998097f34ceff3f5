// Client addresses behind a real reverse proxy, on SQLite and PostgreSQL. A small Node proxy in front of
// the listening service appends the peer's address to X-Forwarded-For, as nginx's
// $proxy_add_x_forwarded_for does; clients connect to it from their own loopback addresses (127.0.0.7 a
// stranger, 127.0.0.9 the provider and the merchant).
// - TRUST_PROXY unset: everyone is the proxy. The provider's signed delivery still goes through after 70
//   forgeries; 30 wrong API keys lock out neither the admin token, console sign-in nor a key that worked;
//   /readyz counts the X-Forwarded-For it did not trust.
// - TRUST_PROXY as a hop count and as the proxy's address: each client is its own address, and no client
//   can choose another by writing X-Forwarded-For itself (limits, source ranges).
import assert from "node:assert/strict";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { paymentSetup, sign } from "../helpers/webhook.ts";

const STRANGER = "127.0.0.7";
const PROVIDER = "127.0.0.9";
const PASSWORD = "correct horse battery";

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** The proxy: forwards everything to `target`, appending the peer's address to X-Forwarded-For. */
async function startProxy(target: number) {
  const server = http.createServer((req, res) => {
    const prior = req.headers["x-forwarded-for"];
    const forwarded = prior === undefined ? req.socket.remoteAddress! : `${String(prior)}, ${req.socket.remoteAddress!}`;
    const upstream = http.request(
      { host: "127.0.0.1", port: target, method: req.method, path: req.url, headers: { ...req.headers, "x-forwarded-for": forwarded }, agent: false },
      (up) => {
        res.writeHead(up.statusCode!, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** One request from the loopback address `from`, on its own connection. */
function send(port: number, from: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, localAddress: from, agent: false, headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

interface Rig {
  h: Harness;
  service: number;
  proxy: Awaited<ReturnType<typeof startProxy>>;
  store: { id: string; key: string };
  invoiceId: string;
  close(): Promise<void>;
}

async function rig(dialect: "sqlite" | "postgres", env: Record<string, string>): Promise<Rig> {
  const h = await createHarness(dialect, env);
  const { store, invoice } = await paymentSetup(h);
  await h.services.console.addUser("ann@example.com", PASSWORD, [store.id]);
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const service = (h.app.server.address() as AddressInfo).port;
  const proxy = await startProxy(service);
  return {
    h,
    service,
    proxy,
    store,
    invoiceId: invoice.id,
    close: async () => {
      await proxy.close();
      await h.close();
    },
  };
}

const webhookPath = (storeId: string) => `/api/paymentPlugins?pluginName=pay&storeId=${storeId}`;
const forged = (r: Rig, i: number) => JSON.stringify({ type: "paid", invoiceId: r.invoiceId, n: i });

for (const { name: dialect, skip } of DIALECTS) {
  describe(`behind a proxy TRUST_PROXY does not name, on ${dialect}`, { skip }, () => {
    let r: Rig;
    before(async () => {
      r = await rig(dialect, {});
    });
    after(() => r?.close());

    test("70 forgeries through the proxy do not stop the provider's signed delivery through the same proxy", async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 70; i++) statuses.push((await send(r.proxy.port, STRANGER, "POST", webhookPath(r.store.id), { "x-signature": "0".repeat(64) }, forged(r, i))).status);
      assert.ok(statuses.includes(429), "the shared address's unverified budget is spent");
      const body = JSON.stringify({ type: "paid", invoiceId: r.invoiceId });
      const genuine = await send(r.proxy.port, PROVIDER, "POST", webhookPath(r.store.id), { "x-signature": sign(body) }, body);
      assert.equal(genuine.status, 200, genuine.body);
    });

    test("30 wrong API keys through the proxy lock out neither the admin token, console sign-in nor a key that worked", async () => {
      assert.equal((await send(r.proxy.port, PROVIDER, "GET", "/api/service/customers", { authorization: r.store.key })).status, 200, "the merchant's key works");
      for (let i = 0; i < 31; i++) await send(r.proxy.port, STRANGER, "GET", "/api/service/customers", { authorization: `sk_guess_${i}_${"z".repeat(40)}` });
      assert.equal((await send(r.proxy.port, STRANGER, "GET", "/api/service/customers", { authorization: `sk_more_${"z".repeat(40)}` })).status, 429);
      assert.equal((await send(r.proxy.port, PROVIDER, "GET", "/api/service/customers", { authorization: r.store.key })).status, 200);
      assert.equal((await send(r.proxy.port, PROVIDER, "GET", "/api/admin/stores", { authorization: `Bearer ${ADMIN_TOKEN}` })).status, 200);
      const signIn = await send(r.proxy.port, PROVIDER, "POST", "/console/api/session", {}, JSON.stringify({ email: "ann@example.com", password: PASSWORD }));
      assert.equal(signIn.status, 200, signIn.body);
    });

    test("/readyz counts the requests whose X-Forwarded-For it did not trust", async () => {
      const ready = await send(r.service, PROVIDER, "GET", "/readyz");
      const details = (JSON.parse(ready.body) as { details: { proxy: { trustProxy: string; untrustedForwardedFor: { requests: number } | null } } }).details.proxy;
      assert.equal(details.trustProxy, "none");
      assert.ok((details.untrustedForwardedFor?.requests ?? 0) > 100, JSON.stringify(details));
    });
  });

  for (const [mode, trust] of [["a hop count", "1"], ["the proxy's address", "127.0.0.1/32"]] as const) {
    describe(`TRUST_PROXY as ${mode} (${trust}), on ${dialect}`, { skip }, () => {
      let r: Rig;
      before(async () => {
        r = await rig(dialect, { TRUST_PROXY: trust, AUTH_FAILURE_LIMIT_MAX: "30" });
      });
      after(() => r?.close());

      test("a stranger naming the provider's address in X-Forwarded-For spends its own budget, not the provider's", async () => {
        const statuses: number[] = [];
        for (let i = 0; i < 70; i++) {
          statuses.push((await send(r.proxy.port, STRANGER, "POST", webhookPath(r.store.id), { "x-signature": "0".repeat(64), "x-forwarded-for": PROVIDER }, forged(r, i))).status);
        }
        assert.deepEqual([statuses.filter((s) => s === 401).length, statuses.filter((s) => s === 429).length], [60, 10]);
        // The provider's own budget is untouched: its misconfigured (unsigned) delivery is checked and rejected, not 429.
        assert.equal((await send(r.proxy.port, PROVIDER, "POST", webhookPath(r.store.id), {}, forged(r, 99))).status, 401);
        const body = JSON.stringify({ type: "paid", invoiceId: r.invoiceId });
        assert.equal((await send(r.proxy.port, PROVIDER, "POST", webhookPath(r.store.id), { "x-signature": sign(body) }, body)).status, 200);
      });

      test("no client chooses its address: 40 key guesses, each with a new X-Forwarded-For, stop at the limit; another client is not held", async () => {
        const statuses: number[] = [];
        for (let i = 0; i < 40; i++) {
          statuses.push((await send(r.proxy.port, STRANGER, "GET", "/api/service/customers", { authorization: `sk_guess_${i}_${"y".repeat(40)}`, "x-forwarded-for": `192.0.2.${i}` })).status);
        }
        assert.deepEqual([statuses.filter((s) => s === 401).length, statuses.filter((s) => s === 429).length], [30, 10]);
        const fresh = await r.h.store("Fresh");
        assert.equal((await send(r.proxy.port, PROVIDER, "GET", "/api/service/customers", { authorization: fresh.key })).status, 200);
      });

      test("source ranges see the real client: the provider's address passes, a stranger naming it in X-Forwarded-For is 403", async () => {
        expectStatus(await r.h.admin("PUT", `/api/admin/stores/${r.store.id}/plugins/pay`, { allowedSources: [`${PROVIDER}/32`] }), 200);
        try {
          const body = JSON.stringify({ type: "ignored" });
          const spoofed = await send(r.proxy.port, STRANGER, "POST", webhookPath(r.store.id), { "x-signature": sign(body), "x-forwarded-for": PROVIDER }, body);
          assert.equal(spoofed.status, 403);
          assert.equal((JSON.parse(spoofed.body) as { error: { code: string } }).error.code, "source_not_allowed");
          assert.equal((await send(r.proxy.port, PROVIDER, "POST", webhookPath(r.store.id), { "x-signature": sign(body) }, body)).status, 200);
        } finally {
          await r.h.admin("PUT", `/api/admin/stores/${r.store.id}/plugins/pay`, { allowedSources: null });
        }
      });

      test("/readyz notes nothing: every X-Forwarded-For came from the trusted proxy", async () => {
        const ready = await send(r.proxy.port, PROVIDER, "GET", "/readyz");
        assert.equal((JSON.parse(ready.body) as { details: { proxy: { untrustedForwardedFor: unknown } } }).details.proxy.untrustedForwardedFor, null);
      });

      if (trust !== "1") {
        test("a client that bypasses the proxy is its own address whatever it writes, and is noted in /readyz", async () => {
          expectStatus(await r.h.admin("PUT", `/api/admin/stores/${r.store.id}/plugins/pay`, { allowedSources: [`${PROVIDER}/32`] }), 200);
          try {
            const body = JSON.stringify({ type: "ignored" });
            const direct = await send(r.service, STRANGER, "POST", webhookPath(r.store.id), { "x-signature": sign(body), "x-forwarded-for": PROVIDER }, body);
            assert.equal(direct.status, 403);
          } finally {
            await r.h.admin("PUT", `/api/admin/stores/${r.store.id}/plugins/pay`, { allowedSources: null });
          }
          const ready = await send(r.service, PROVIDER, "GET", "/readyz");
          assert.equal((JSON.parse(ready.body) as { details: { proxy: { untrustedForwardedFor: { requests: number } } } }).details.proxy.untrustedForwardedFor.requests, 1);
        });
      }
    });
  }
}
