// Live delivery streams are capped per session and per process, so the console never takes the connection
// room webhooks need (HTTP_MAX_CONNECTIONS): past a session's cap a new stream is 429, past the process's
// cap 503, both with Retry-After; a closed stream frees its place; and while one login tries to open far
// more streams than there are connections, a provider's webhook is still answered. Over real HTTP.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { ADMIN_TOKEN, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { installPlugin } from "../helpers/webhook.ts";

const PASSWORD = "correct horse battery";

interface Opened {
  status: number;
  retryAfter: string | undefined;
  close(): void;
}

/** Opens a stream on its own connection (no keep-alive pool): an answered refusal closes its connection. */
function openStream(port: number, storeId: string, cookie: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path: `/console/api/stores/${storeId}/deliveries/stream`, agent: false, headers: { cookie: `storefront_session=${cookie}`, connection: "close" } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode!, retryAfter: res.headers["retry-after"], close: () => req.destroy() });
    });
    req.on("error", reject);
    req.end();
  });
}

function webhook(port: number, storeId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: `/api/paymentPlugins?pluginName=ok&storeId=${storeId}`, agent: false, headers: { "content-type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
    });
    req.on("error", reject);
    req.end("{}");
  });
}

describe("console stream caps", () => {
  let h: Harness;
  let port: number;
  let store: { id: string };
  const sessions: string[] = [];
  const open: Opened[] = [];
  before(async () => {
    h = await createHarness("sqlite", { HTTP_MAX_CONNECTIONS: "20", CONSOLE_STREAMS_PER_SESSION: "2", CONSOLE_STREAMS_MAX: "4" });
    store = await h.store();
    await installPlugin(h, store.id, "ok", `return { status = "ignore" }`);
    await h.services.console.addUser("ann@example.com", PASSWORD, [store.id]);
    for (const body of [{ token: ADMIN_TOKEN }, { email: "ann@example.com", password: PASSWORD }, { token: ADMIN_TOKEN }]) {
      const r = await h.app.inject({ method: "POST", url: "/console/api/session", payload: body });
      expectStatus(r, 200);
      sessions.push(/storefront_session=([^;]*)/.exec(String(r.headers["set-cookie"]))![1]!);
    }
    await h.app.listen({ host: "127.0.0.1", port: 0 });
    port = (h.app.server.address() as { port: number }).port;
  });
  after(async () => {
    for (const o of open) o.close();
    await h.close();
  });

  test("a session's third stream is 429 with Retry-After; closing one lets the next open", async () => {
    const [a] = sessions;
    open.push(await openStream(port, store.id, a!), await openStream(port, store.id, a!));
    assert.deepEqual(open.map((o) => o.status), [200, 200]);
    const third = await openStream(port, store.id, a!);
    assert.equal(third.status, 429);
    assert.ok(Number(third.retryAfter) > 0);
    open.shift()!.close();
    // The server sees the close asynchronously: the next stream opens once it has.
    let next = await openStream(port, store.id, a!);
    for (let i = 0; i < 50 && next.status === 429; i++) {
      await new Promise((r) => setTimeout(r, 20));
      next = await openStream(port, store.id, a!);
    }
    assert.equal(next.status, 200);
    open.push(next);
  });

  test("past the process's cap (4) any session's stream is 503 with Retry-After", async () => {
    const [, b, c] = sessions;
    open.push(await openStream(port, store.id, b!), await openStream(port, store.id, b!));
    assert.deepEqual(open.map((o) => o.status), [200, 200, 200, 200]);
    const fifth = await openStream(port, store.id, c!);
    assert.equal(fifth.status, 503);
    assert.ok(Number(fifth.retryAfter) > 0);
  });

  test("one login asking for 40 streams with HTTP_MAX_CONNECTIONS=20 does not stop a webhook from being answered", async () => {
    const [, b] = sessions;
    const asked = await Promise.all(Array.from({ length: 40 }, () => openStream(port, store.id, b!)));
    open.push(...asked.filter((o) => o.status === 200));
    assert.equal(asked.filter((o) => o.status === 200).length, 0, "the caps are full");
    assert.equal(await webhook(port, store.id), 200);
  });
});
