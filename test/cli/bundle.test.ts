// The server's bundle (tools/build-server.js, run at install) as bin/storefront.js uses it: while it is
// fresh, the main thread and both kinds of worker thread start from it, and every file the sources find
// beside themselves is found from it (the Lua prelude, the catalogue, the console's code, the release in
// package.json, swagger-ui's pages); once a source changes, or with STOREFRONT_SOURCES=1, the sources run.
// Which files a process loads is recorded by a module hook in every thread (--import, inherited by workers).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { firstDay } from "../../bench/footprint/traffic.ts";
import { REPO } from "../helpers/cli.ts";
import { freePort } from "../helpers/server.ts";

const DIST = path.join(REPO, "node_modules/.cache/storefront/dist");
const ADMIN_TOKEN = "bundle-test-admin-token-0123456789";
const RELEASE = (JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { version: string }).version;

const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-bundle-"));
const HOOK = path.join(dir, "record-loads.mjs");
writeFileSync(
  HOOK,
  `import module from "node:module";
import { appendFileSync } from "node:fs";
import { threadId } from "node:worker_threads";
module.registerHooks({ load(url, context, next) { appendFileSync(process.env.LOADED_LOG, threadId + " " + url + "\\n"); return next(url, context); } });
`,
);

before(() => {
  const build = spawnSync(process.execPath, ["tools/build-server.js", "--quiet"], { cwd: REPO, encoding: "utf8" });
  assert.equal(build.status, 0, build.stderr);
  assert.equal(build.stderr, "", "the build warned");
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** The environment of a recorded run: a fresh SQLite database, the bundle allowed. */
function recordedEnv(log: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOADED_LOG: log, DATABASE_URL: `sqlite:${path.join(dir, `${path.basename(log)}.db`)}`, LOG_LEVEL: "warn", ...extra };
  for (const k of ["STOREFRONT_SOURCES", "SECRETS_KEY", "PORT", "HOST"]) if (!(k in extra)) delete env[k];
  return env;
}

/** Each thread's loaded files (thread id → URLs). */
function loads(log: string): Map<number, string[]> {
  const threads = new Map<number, string[]>();
  for (const line of readFileSync(log, "utf8").trim().split("\n")) {
    const [id, url] = line.split(" ") as [string, string];
    threads.set(Number(id), [...(threads.get(Number(id)) ?? []), url]);
  }
  return threads;
}

const fromSources = (url: string) => url.startsWith(`file://${REPO}/src/`);
const fromBundle = (url: string, entry: string) => url.endsWith(`/node_modules/.cache/storefront/dist/${entry}`);

/** `storefront <args>` with the hook; its output and what its main thread loaded. */
function runRecorded(args: string[], name: string, extra: Record<string, string> = {}): { stdout: string; main: string[] } {
  const log = path.join(dir, name);
  const run = spawnSync(process.execPath, ["--import", HOOK, "bin/storefront.js", ...args], { cwd: REPO, env: recordedEnv(log, extra), encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  return { stdout: run.stdout, main: loads(log).get(0) ?? [] };
}

test("a fresh bundle serves, its worker threads start from their own bundles, and every file beside the sources is found", { timeout: 120_000 }, async () => {
  const log = path.join(dir, "serve");
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = recordedEnv(log, { PORT: String(port), HOST: "127.0.0.1", ADMIN_TOKEN, PLUGIN_POOL_SIZE: "1", READ_THREADS: "1" });
  const server = spawn(process.execPath, ["--import", HOOK, "bin/storefront.js", "serve"], { cwd: REPO, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  server.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    for (let i = 0; !(await fetch(`${base}/readyz`).then((r) => r.ok, () => false)); i++) {
      assert.equal(server.exitCode, null, stderr);
      assert.ok(i < 600, `not ready: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Payments (the sandbox's worker, the Lua prelude), pages (a reader thread), the console's page and
    // assets (built from console-ui/), the OpenAPI document.
    const done = await firstDay(base, ADMIN_TOKEN, 4);
    assert.equal(done.payments, 4);
    assert.ok((done.consoleAssets ?? 0) > 0);
    for (const page of ["/docs", "/docs/static/swagger-ui.css"]) assert.equal((await fetch(`${base}${page}`)).status, 200, page);
  } finally {
    // How the server drains is test/cli/npm-start.test.ts's subject; here only what it loaded.
    server.kill("SIGTERM");
    if (server.exitCode === null) await once(server, "exit");
  }
  assert.equal(stderr, "");

  const threads = loads(log);
  const all = [...threads.values()].flat();
  assert.deepEqual(all.filter(fromSources), [], "no thread loads a source");
  assert.ok(threads.get(0)?.some((u) => fromBundle(u, "main.mjs")), "the main thread runs the bundle");
  const workers = [...threads.entries()].filter(([id]) => id !== 0).map(([, urls]) => urls);
  assert.ok(workers.some((urls) => urls.some((u) => fromBundle(u, "sandbox.worker.mjs"))), "a sandbox worker starts from its bundle");
  assert.ok(workers.some((urls) => urls.some((u) => fromBundle(u, "readers.worker.mjs"))), "a reader thread starts from its bundle");
});

test("from a fresh bundle, a plugin's fetch and a webhook to an endpoint reach their servers (undici, loaded on first use)", { timeout: 120_000 }, async () => {
  // Both go through undici, which the bundle loads on the first outbound request.
  const seen: string[] = [];
  const receiver = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on("end", () => res.end("ok"));
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  const target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = recordedEnv(path.join(dir, "outbound"), { PORT: String(port), HOST: "127.0.0.1", ADMIN_TOKEN, PLUGIN_POOL_SIZE: "1", PLUGIN_FETCH_ALLOW: "127.0.0.1", ENDPOINT_ALLOW: "127.0.0.1" });
  const server = spawn(process.execPath, ["--import", HOOK, "bin/storefront.js", "serve"], { cwd: REPO, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  server.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const admin = (url: string, method: string, body: unknown) =>
    fetch(`${base}/api/admin${url}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  try {
    for (let i = 0; !(await fetch(`${base}/readyz`).then((r) => r.ok, () => false)); i++) {
      assert.equal(server.exitCode, null, stderr);
      assert.ok(i < 600, `not ready: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const store = (await (await admin("/stores", "POST", { name: "outbound" })).json()) as { id: string };
    const source = `local r, err = fetch(${JSON.stringify(`${target}/fetched`)}) if not r then error(err) end return { status = "ignore" }`;
    assert.equal((await admin(`/stores/${store.id}/plugins/probe`, "PUT", { source })).status, 201);
    const delivery = await fetch(`${base}/api/paymentPlugins?pluginName=probe&storeId=${store.id}`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    assert.equal(delivery.status, 200, await delivery.text());
    const endpoint = (await (await admin(`/stores/${store.id}/endpoints`, "POST", { url: `${target}/events` })).json()) as { id: string };
    const sent = (await (await admin(`/stores/${store.id}/endpoints/${endpoint.id}/test`, "POST", {})).json()) as { ok: boolean };
    assert.equal(sent.ok, true, JSON.stringify(sent));
    assert.deepEqual(seen, ["GET /fetched", "POST /events"]);
  } finally {
    server.kill("SIGTERM");
    if (server.exitCode === null) await once(server, "exit");
    receiver.close();
  }
  assert.ok(loads(path.join(dir, "outbound")).get(0)?.some((u) => fromBundle(u, "main.mjs")), "the server ran from the bundle");
});

test("commands run from a fresh bundle: the release and the catalogue are found", () => {
  const version = runRecorded(["--version"], "version");
  assert.ok(version.main.some((u) => fromBundle(u, "main.mjs")));
  assert.match(version.stdout, new RegExp(`\\b${RELEASE.replaceAll(".", "\\.")}\\b`));
  const catalog = runRecorded(["plugins", "catalog", "--json"], "catalog");
  assert.ok(catalog.main.some((u) => fromBundle(u, "main.mjs")));
  assert.ok((JSON.parse(catalog.stdout) as { data: unknown[] }).data.length > 0);
});

test("a bundle older than the sources, or STOREFRONT_SOURCES=1, runs the sources", () => {
  // A source added since the build makes the bundle stale, and removing it makes it fresh again exactly.
  // (Not an edited file's modification time: setting it back goes through a double of seconds and lands a
  // millisecond off about half the time, and the bundle would stay stale for the rest of the suite.)
  const added = path.join(REPO, "src/bundle-test-added.ts");
  try {
    writeFileSync(added, "export {};\n");
    const stale = runRecorded(["--version"], "stale");
    assert.ok(stale.main.some((u) => u === `file://${REPO}/src/main.ts`), "the sources run");
    assert.ok(!stale.main.some((u) => u.includes("/.cache/storefront/dist/")), "the bundle is not loaded");
  } finally {
    rmSync(added, { force: true });
  }
  const asked = runRecorded(["--version"], "asked", { STOREFRONT_SOURCES: "1" });
  assert.ok(asked.main.some((u) => u === `file://${REPO}/src/main.ts`));
  // The source as it was: the bundle is fresh again.
  assert.ok(runRecorded(["--version"], "fresh-again").main.some((u) => fromBundle(u, "main.mjs")));
  assert.ok(statSync(path.join(DIST, "stamp.json")).isFile());
});
