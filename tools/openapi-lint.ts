// `npm run lint:openapi`: writes the OpenAPI document exactly as /openapi.json serves it (buildApp on a
// throwaway SQLite database) to .openapi/openapi.json, then lints it with Redocly's recommended rules
// (redocly.yaml). Exits non-zero on any error or warning, so CI fails on both.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createServices } from "../src/services.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** Inside the repository: the lint-ignore file (.redocly.lint-ignore.yaml) names the document by this path. */
export const OPENAPI_OUT = path.join(ROOT, ".openapi", "openapi.json");

/** The document /openapi.json serves, on default settings (API_NAMESPACE=service). */
export async function dumpOpenApi(file = OPENAPI_OUT): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-openapi-"));
  try {
    const services = await createServices(loadConfig({ DATABASE_URL: `sqlite:${path.join(dir, "openapi.db")}`, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }));
    try {
      const app = await buildApp(services, { logger: false });
      const res = await app.inject({ method: "GET", url: "/openapi.json" });
      await app.close();
      if (res.statusCode !== 200) throw new Error(`/openapi.json answered ${res.statusCode}`);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify(res.json(), null, 2) + "\n");
      return file;
    } finally {
      await services.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `redocly lint` on the file; returns its exit code and output. */
export function lintOpenApi(file = OPENAPI_OUT): { status: number; output: string } {
  const cli = path.join(ROOT, "node_modules", "@redocly", "cli", "bin", "cli.js");
  const run = spawnSync(process.execPath, [cli, "lint", file, "--config", path.join(ROOT, "redocly.yaml"), "--max-problems", "100"], {
    cwd: ROOT,
    encoding: "utf8",
    // No telemetry or update checks: CI has no business talking to the vendor.
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    timeout: 120_000,
  });
  const output = `${run.stdout ?? ""}${run.stderr ?? ""}`;
  // Redocly exits 0 with warnings; lint clean means none of either.
  const warnings = /You have (\d+) warnings?/.exec(output);
  return { status: run.status !== 0 ? (run.status ?? 1) : warnings ? 1 : 0, output };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = await dumpOpenApi();
  const { status, output } = lintOpenApi(file);
  process.stdout.write(output);
  process.exitCode = status;
}
