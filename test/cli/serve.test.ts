// `storefront serve` as a real process: the embedded default with no configuration at all, and a
// graceful SIGTERM that answers the requests in flight before exiting.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { randomBytes } from "node:crypto";
import { loadConfig } from "../../src/config.ts";
import { createServices } from "../../src/services.ts";
import { arrivedAtGate, gate, shuttingDown } from "../helpers/gate.ts";
import { startServer } from "../helpers/server.ts";

test("with no configuration, serve creates and migrates an SQLite database and a secrets key under ./data", async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), "storefront-serve-"));
  const server = await startServer({ __CWD: cwd, DATABASE_URL: "", SECRETS_KEY: "", ADMIN_TOKEN: "" });
  try {
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    assert.ok(existsSync(path.join(cwd, "data", "storefront.db")), "database file created");
    const key = path.join(cwd, "data", "secrets.key");
    assert.ok(existsSync(key), "secrets key created beside it");
    assert.equal(statSync(key).mode & 0o777, 0o600, "readable by the owner only");
    const r = await fetch(`${server.url}/api/service/customers`);
    assert.equal(r.status, 401);
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, "unauthorized");
  } finally {
    await server.stop();
    rmSync(cwd, { recursive: true, force: true });
  }
});

test("SIGTERM finishes the requests in flight (slow webhooks), then exits 0", async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), "storefront-serve-"));
  const held = await gate();
  const env = { DATABASE_URL: `sqlite:${path.join(cwd, "sf.db")}`, SECRETS_KEY: randomBytes(32).toString("hex"), PLUGIN_POOL_SIZE: "4", PLUGIN_FETCH_ALLOW: "127.0.0.1" };
  // A plugin whose deliveries wait on the gate, installed before the server opens the same file.
  const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent" }));
  const store = await services.stores.createStore("slow");
  await services.plugins.install(store.id, "slow", { source: `local r = fetch(${JSON.stringify(held.url)}) return { status = "ignore" }` });
  await services.close();
  const server = await startServer({ __CWD: cwd, ...env });
  try {
    const url = `${server.url}/api/paymentPlugins?pluginName=slow&storeId=${store.id}`;
    const inFlight = Array.from({ length: 4 }, () =>
      fetch(url, { method: "POST", body: "{}", headers: { "content-type": "application/json" } }).then(
        async (r) => ({ status: r.status, body: await r.text() }),
        (err: unknown) => ({ status: 0, body: String(err) }),
      ),
    );
    // Every delivery is in the sandbox, waiting on the gate; the signal goes now, and the gate opens only
    // once the server refuses new requests.
    await arrivedAtGate(held, 4, server.output);
    const stopped = server.stop();
    await shuttingDown(server.url);
    held.release();
    const code = await stopped;
    const answers = await Promise.all(inFlight);
    assert.equal(code, 0, server.output());
    for (const a of answers) assert.deepEqual(a, { status: 200, body: '{"status":"ignore"}' }, "every request in flight was answered");
    await assert.rejects(fetch(`${server.url}/healthz`), "after exit nothing listens");
  } finally {
    await server.kill9();
    await held.close();
    rmSync(cwd, { recursive: true, force: true });
  }
});

test("a bad setting stops start-up with a message naming the variable", async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), "storefront-serve-"));
  try {
    await assert.rejects(startServer({ __CWD: cwd, PORT: "", PLUGIN_MEMORY_MB: "lots" }), /PLUGIN_MEMORY_MB must be a whole number/);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});
