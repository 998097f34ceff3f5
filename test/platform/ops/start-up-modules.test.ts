// What a start loads: an HTTP client is not needed until the first outbound request, so building the
// application and answering /readyz loads neither Node's own bundled undici (an ES import of node:http
// reads its WebSocket getter, which loads it: ~25 ms of a start) nor the undici package.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { REPO } from "../../helpers/cli.ts";

test("building the app and answering /readyz loads no HTTP client: neither Node's bundled undici nor the undici package", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-modules-"));
  const src = (file: string) => JSON.stringify(pathToFileURL(path.join(REPO, "src", file)).href);
  const script = `
    import { createRequire } from "node:module";
    const { createServices } = await import(${src("services.ts")});
    const { buildApp } = await import(${src("app.ts")});
    const { loadConfig } = await import(${src("config.ts")});
    const config = loadConfig({ DATABASE_URL: ${JSON.stringify(`sqlite:${path.join(dir, "s.db")}`)}, LOG_LEVEL: "silent", METRICS_PORT: "65000" });
    const services = await createServices(config);
    await services.db.migrate();
    // METRICS_PORT: the separate metrics server is made (it listens only with the app, never here).
    const app = await buildApp(services, { logger: false });
    const ready = await app.inject({ method: "GET", url: "/readyz" });
    const cache = Object.keys(createRequire(import.meta.url).cache);
    console.log(JSON.stringify({
      ready: ready.statusCode,
      nodeUndici: process.moduleLoadList.filter((m) => m.includes("undici")),
      undiciPackage: cache.filter((f) => f.includes("/node_modules/undici/")),
    }));
    await app.close();
    await services.close();
  `;
  try {
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: REPO, encoding: "utf8", env: { ...process.env, STOREFRONT_SOURCES: "1" } });
    assert.equal(run.status, 0, run.stderr);
    const seen = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as { ready: number; nodeUndici: string[]; undiciPackage: string[] };
    assert.equal(seen.ready, 200);
    assert.deepEqual(seen.nodeUndici, [], "Node's bundled undici was loaded");
    assert.deepEqual(seen.undiciPackage, [], "the undici package was loaded");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
