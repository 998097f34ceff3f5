// `storefront serve` as a real process: the embedded default with no configuration at all, and a
// graceful SIGTERM that answers the requests in flight before exiting.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { startServer } from "./helpers/server.ts";

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

test("SIGTERM finishes the requests in flight, then exits 0", async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), "storefront-serve-"));
  const server = await startServer({ __CWD: cwd });
  try {
    const inFlight = Array.from({ length: 30 }, () => fetch(`${server.url}/openapi.json`).then((r) => r.status));
    await new Promise((r) => setTimeout(r, 5));
    const code = await server.stop();
    const statuses = await Promise.all(inFlight.map((p) => p.catch(() => "refused")));
    assert.equal(code, 0);
    // Requests accepted before the signal are answered; later ones are refused at the socket, never cut off.
    for (const s of statuses) assert.ok(s === 200 || s === 503 || s === "refused", String(s));
    assert.ok(statuses.filter((s) => s === 200).length > 0);
  } finally {
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
