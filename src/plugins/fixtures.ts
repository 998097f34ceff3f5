// The merchant's plugin test runner: runs one Lua plugin in the real sandbox against recorded
// requests (fixtures: body, headers, secrets, invoices, expected result) with no database and no
// server, and reports pass or fail per fixture. `storefront plugins test FILE.lua --fixtures DIR`.
// Fixtures may pin the clock (`now`) so recorded, timestamped signatures stay valid, and may describe
// HTTP answers (`http`) played by a local server for plugins that call their provider's API.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { createSandbox, type LogLine, type RunOutcome, type Sandbox, type SandboxLimits } from "../sandbox/index.ts";

export interface FixtureRequest {
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  body: Buffer;
}

/** One answer of the local HTTP server, for the first request that matches method and path. */
export interface FixtureHttpAnswer {
  method: string | null;
  path: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface FixtureLogExpectation {
  type: string | null;
  contains: string;
}

export type FixtureExpectation =
  | { kind: "result"; status: string; invoiceId: string | null; logs: FixtureLogExpectation[] }
  | { kind: "error"; error: string; message: string | null; logs: FixtureLogExpectation[] };

export interface Fixture {
  name: string;
  file: string;
  description: string | null;
  request: FixtureRequest;
  secrets: Record<string, string>;
  store: { id: string };
  plugin: { name: string; version: number };
  /** What getInvoice returns, by id; any other id is not in this store (nil). */
  invoices: Record<string, unknown>;
  /** Unix seconds that os.time() returns during the run; null = the real clock. */
  now: number | null;
  http: FixtureHttpAnswer[];
  expect: FixtureExpectation;
}

export type FixtureLoad = { ok: true; fixture: Fixture } | { ok: false; file: string; message: string };

export interface CaseReport {
  name: string;
  file: string;
  passed: boolean;
  expected: string;
  actual: string;
  /** Why it failed, one line each; empty when it passed. */
  problems: string[];
  outcome: RunOutcome | null;
  durationMs: number;
}

export interface TestRun {
  plugin: string;
  reports: CaseReport[];
  passed: number;
  failed: number;
}

export const DEFAULTS_FILE = "_defaults.json";
const MOCK_PLACEHOLDER = "{{mock}}";

type Json = Record<string, unknown>;

class FixtureError extends Error {}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new FixtureError(`${what} must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean") throw new FixtureError(`${what}.${k} must be a string`);
    out[k] = String(v);
  }
  return out;
}

/** `{{env:NAME}}` in a secret is read from the environment, so real secrets need not be committed. */
function expandEnv(secrets: Record<string, string>, env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secrets)) {
    out[k] = v.replace(/\{\{env:([A-Za-z_][A-Za-z0-9_]*)\}\}/g, (_, name: string) => {
      const value = env[name];
      if (value === undefined) throw new FixtureError(`secrets.${k} needs the environment variable ${name}, which is not set`);
      return value;
    });
  }
  return out;
}

function parseNow(value: unknown): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "number" && Number.isFinite(value)) return Math.floor(value);
  if (typeof value === "string") {
    const ms = Date.parse(value);
    if (!Number.isNaN(ms)) return Math.floor(ms / 1000);
  }
  throw new FixtureError(`now must be unix seconds or an ISO 8601 time, got ${JSON.stringify(value)}`);
}

function parseRequest(value: unknown): FixtureRequest {
  if (!isObject(value)) throw new FixtureError("request must be an object");
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(stringMap(value.headers, "request.headers"))) headers[k.toLowerCase()] = v;
  let body: Buffer;
  if (typeof value.bodyBase64 === "string") body = Buffer.from(value.bodyBase64, "base64");
  else if (typeof value.body === "string") body = Buffer.from(value.body, "utf8");
  else if (value.body === undefined || value.body === null) body = Buffer.alloc(0);
  // A JSON value is sent as JSON.stringify writes it: compact, keys in file order.
  else body = Buffer.from(JSON.stringify(value.body), "utf8");
  const method = value.method === undefined ? "POST" : value.method;
  if (typeof method !== "string") throw new FixtureError("request.method must be a string");
  return { method, headers, query: stringMap(value.query, "request.query"), body };
}

function parseHttp(value: unknown): FixtureHttpAnswer[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new FixtureError("http must be an array of answers");
  return value.map((a: unknown, i) => {
    if (!isObject(a) || typeof a.path !== "string") throw new FixtureError(`http[${i}] needs a path`);
    const status = a.status === undefined ? 200 : a.status;
    if (typeof status !== "number") throw new FixtureError(`http[${i}].status must be a number`);
    const headers = stringMap(a.headers, `http[${i}].headers`);
    let body = "";
    if (a.json !== undefined) {
      body = JSON.stringify(a.json);
      headers["content-type"] ??= "application/json";
    } else if (typeof a.body === "string") body = a.body;
    return { method: typeof a.method === "string" ? a.method.toUpperCase() : null, path: a.path, status, headers, body };
  });
}

function parseLogs(value: unknown): FixtureLogExpectation[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new FixtureError("expect.logs must be an array");
  return value.map((l: unknown, i) => {
    if (typeof l === "string") return { type: null, contains: l };
    if (!isObject(l) || typeof l.contains !== "string") throw new FixtureError(`expect.logs[${i}] needs contains`);
    return { type: typeof l.type === "string" ? l.type : null, contains: l.contains };
  });
}

function parseExpect(value: unknown): FixtureExpectation {
  if (!isObject(value)) throw new FixtureError('expect must be {"result": {...}} or {"error": "<kind>"}');
  const logs = parseLogs(value.logs);
  if (isObject(value.result)) {
    const { status, invoiceId } = value.result;
    if (typeof status !== "string") throw new FixtureError("expect.result.status must be a string");
    if (invoiceId !== undefined && invoiceId !== null && typeof invoiceId !== "string") throw new FixtureError("expect.result.invoiceId must be a string");
    return { kind: "result", status, invoiceId: typeof invoiceId === "string" ? invoiceId : null, logs };
  }
  if (typeof value.error === "string") {
    return { kind: "error", error: value.error, message: typeof value.message === "string" ? value.message : null, logs };
  }
  throw new FixtureError('expect must be {"result": {...}} or {"error": "<kind>"}');
}

/** One fixture from its parsed JSON, over the directory's defaults. Throws FixtureError. */
export function parseFixture(raw: unknown, file: string, defaults: Json = {}, env: NodeJS.ProcessEnv = process.env, pluginName = "plugin"): Fixture {
  if (!isObject(raw)) throw new FixtureError("a fixture must be a JSON object");
  const merged: Json = { ...defaults, ...raw };
  merged.secrets = { ...(isObject(defaults.secrets) ? defaults.secrets : {}), ...(isObject(raw.secrets) ? raw.secrets : {}) };
  merged.invoices = { ...(isObject(defaults.invoices) ? defaults.invoices : {}), ...(isObject(raw.invoices) ? raw.invoices : {}) };
  merged.http = [...(Array.isArray(raw.http) ? raw.http : []), ...(Array.isArray(defaults.http) ? defaults.http : [])];

  const invoices: Record<string, unknown> = {};
  for (const [id, invoice] of Object.entries(merged.invoices as Json)) {
    if (!isObject(invoice)) throw new FixtureError(`invoices.${id} must be an object`);
    invoices[id] = { id, status: "pending", ...invoice };
  }
  const store = isObject(merged.store) && typeof merged.store.id === "string" ? { id: merged.store.id } : { id: "st_fixture" };
  const plugin = {
    name: isObject(merged.plugin) && typeof merged.plugin.name === "string" ? merged.plugin.name : pluginName,
    version: isObject(merged.plugin) && typeof merged.plugin.version === "number" ? merged.plugin.version : 1,
  };
  return {
    name: typeof merged.name === "string" ? merged.name : path.basename(file, ".json"),
    file,
    description: typeof merged.description === "string" ? merged.description : null,
    request: parseRequest(merged.request),
    secrets: expandEnv(stringMap(merged.secrets, "secrets"), env),
    store,
    plugin,
    invoices,
    now: parseNow(merged.now),
    http: parseHttp(merged.http),
    expect: parseExpect(merged.expect),
  };
}

/** Every `*.json` fixture of a directory (sorted, `_defaults.json` merged into each), or why one is unusable. */
export function loadFixtures(dir: string, options: { env?: NodeJS.ProcessEnv; pluginName?: string } = {}): FixtureLoad[] {
  const env = options.env ?? process.env;
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return [{ ok: false, file: dir, message: "not a directory" }];
  let defaults: Json = {};
  const defaultsPath = path.join(dir, DEFAULTS_FILE);
  if (statSync(defaultsPath, { throwIfNoEntry: false })?.isFile()) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(defaultsPath, "utf8"));
      if (!isObject(parsed)) return [{ ok: false, file: defaultsPath, message: "must be a JSON object" }];
      defaults = parsed;
    } catch (err) {
      return [{ ok: false, file: defaultsPath, message: err instanceof Error ? err.message : String(err) }];
    }
  }
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".json") && !f.startsWith("_"))
    .sort();
  return files.map((f): FixtureLoad => {
    const file = path.join(dir, f);
    try {
      const raw: unknown = JSON.parse(readFileSync(file, "utf8"));
      return { ok: true, fixture: parseFixture(raw, file, defaults, env, options.pluginName) };
    } catch (err) {
      if (err instanceof FixtureError || err instanceof SyntaxError) return { ok: false, file, message: err.message };
      throw err;
    }
  });
}

/**
 * The source with os.time()/os.date() answering `now`: a local `os` declared on the first line, so
 * line numbers in error messages stay those of the file. (Reaching the real clock through _G.os or
 * _ENV.os bypasses it.)
 */
export function pinClock(source: string, now: number): string {
  const n = Math.floor(now);
  return (
    "local os = (function(real) local o = {} for k, v in pairs(real) do o[k] = v end " +
    `o.time = function(t) if t == nil then return ${n} end return real.time(t) end ` +
    `o.date = function(f, t) return real.date(f, t or ${n}) end return o end)(os); ` +
    source
  );
}

/** A loopback HTTP server answering each run's `http` fixtures; unknown requests get 404. */
async function startMockServer(): Promise<{ base: string; use(answers: FixtureHttpAnswer[]): void; close(): Promise<void> }> {
  let answers: FixtureHttpAnswer[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const match = answers.find((a) => (a.method === null || a.method === req.method) && (a.path === url.pathname || a.path === `${url.pathname}${url.search}`));
      if (!match) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: `no http fixture for ${req.method} ${url.pathname}` }));
        return;
      }
      res.writeHead(match.status, match.headers);
      res.end(match.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    use(next) {
      answers = next;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function describeOutcome(outcome: RunOutcome): string {
  if (!outcome.ok) return `${outcome.error.kind}`;
  return outcome.result.invoiceId === undefined ? outcome.result.status : `${outcome.result.status} ${outcome.result.invoiceId}`;
}

function describeExpectation(e: FixtureExpectation): string {
  if (e.kind === "error") return e.error;
  return e.invoiceId === null ? e.status : `${e.status} ${e.invoiceId}`;
}

function logProblems(expected: FixtureLogExpectation[], logs: LogLine[]): string[] {
  const problems: string[] = [];
  for (const want of expected) {
    const found = logs.some((l) => l.description.includes(want.contains) && (want.type === null || l.type === want.type));
    if (!found) problems.push(`no ${want.type ?? ""}${want.type ? " " : ""}log line containing "${want.contains}"`);
  }
  return problems;
}

/** Compares what the run gave with what the fixture expects; empty when they agree. */
export function judge(expect: FixtureExpectation, outcome: RunOutcome): string[] {
  const problems: string[] = [];
  if (expect.kind === "result") {
    if (!outcome.ok) {
      problems.push(`expected ${describeExpectation(expect)}, the run failed with ${outcome.error.kind}: ${outcome.error.message}`);
    } else {
      if (outcome.result.status !== expect.status) problems.push(`status: expected ${expect.status}, got ${outcome.result.status}`);
      const got = outcome.result.invoiceId ?? null;
      if (got !== expect.invoiceId) problems.push(`invoiceId: expected ${expect.invoiceId ?? "none"}, got ${got ?? "none"}`);
    }
  } else if (outcome.ok) {
    problems.push(`expected the run to fail with ${expect.error}, it returned ${describeOutcome(outcome)}`);
  } else {
    if (outcome.error.kind !== expect.error) problems.push(`error: expected ${expect.error}, got ${outcome.error.kind}: ${outcome.error.message}`);
    if (expect.message !== null && !outcome.error.message.includes(expect.message)) {
      problems.push(`error message "${outcome.error.message}" does not contain "${expect.message}"`);
    }
  }
  return [...problems, ...logProblems(expect.logs, outcome.logs)];
}

export interface RunFixturesOptions {
  /** A sandbox to use (closed by the caller); by default one is created and closed here. */
  sandbox?: Sandbox;
  limits?: Partial<SandboxLimits>;
}

/** Runs the plugin against each fixture in turn. Never throws for anything the plugin does. */
export async function runFixtures(source: string, fixtures: Fixture[], options: RunFixturesOptions = {}): Promise<CaseReport[]> {
  const needsServer = fixtures.some((f) => f.http.length > 0 || Object.values(f.secrets).some((v) => v.includes(MOCK_PLACEHOLDER)));
  const mock = needsServer ? await startMockServer() : null;
  const sandbox =
    options.sandbox ??
    createSandbox({
      poolSize: 1,
      ...options.limits,
      fetchAllow: [...(options.limits?.fetchAllow ?? []), ...(mock ? ["127.0.0.1"] : [])],
    });
  const reports: CaseReport[] = [];
  try {
    for (const fixture of fixtures) {
      const secrets: Record<string, string> = {};
      for (const [k, v] of Object.entries(fixture.secrets)) secrets[k] = mock ? v.split(MOCK_PLACEHOLDER).join(mock.base) : v;
      mock?.use(fixture.http);
      const started = performance.now();
      const outcome = await sandbox.run(
        {
          source: fixture.now === null ? source : pinClock(source, fixture.now),
          request: fixture.request,
          store: fixture.store,
          plugin: fixture.plugin,
          secrets,
        },
        { getInvoice: async (id) => fixture.invoices[id] ?? null },
      );
      const problems = judge(fixture.expect, outcome);
      reports.push({
        name: fixture.name,
        file: fixture.file,
        passed: problems.length === 0,
        expected: describeExpectation(fixture.expect),
        actual: describeOutcome(outcome),
        problems,
        outcome,
        durationMs: performance.now() - started,
      });
    }
  } finally {
    if (!options.sandbox) await sandbox.close();
    await mock?.close();
  }
  return reports;
}

/** Loads the fixtures of `dir` and runs the plugin file against them. */
export async function testPlugin(pluginFile: string, fixturesDir: string, options: RunFixturesOptions & { env?: NodeJS.ProcessEnv; only?: string } = {}): Promise<TestRun> {
  const source = readFileSync(pluginFile, "utf8");
  const pluginName = path.basename(pluginFile, ".lua");
  const loads = loadFixtures(fixturesDir, { pluginName, ...(options.env ? { env: options.env } : {}) });
  const selected = options.only ? loads.filter((l) => (l.ok ? l.fixture.name : l.file).includes(options.only!)) : loads;
  const fixtures = selected.flatMap((l) => (l.ok ? [l.fixture] : []));
  const broken: CaseReport[] = selected.flatMap((l) =>
    l.ok ? [] : [{ name: path.basename(l.file), file: l.file, passed: false, expected: "-", actual: "unreadable", problems: [l.message], outcome: null, durationMs: 0 }],
  );
  const reports = [...broken, ...(await runFixtures(source, fixtures, options))];
  const passed = reports.filter((r) => r.passed).length;
  return { plugin: pluginFile, reports, passed, failed: reports.length - passed };
}

/** The pass/fail table, then the details of every failure. */
export function formatTestRun(run: TestRun, options: { verbose?: boolean } = {}): string {
  const rows = run.reports.map((r) => [r.passed ? "PASS" : "FAIL", r.name, r.expected, r.actual, `${r.durationMs.toFixed(1)} ms`]);
  const header = ["", "fixture", "expected", "got", "time"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  const out = [`${run.plugin}`, line(header), ...rows.map(line)];
  for (const r of run.reports) {
    if (r.passed && !options.verbose) continue;
    out.push("", `${r.passed ? "PASS" : "FAIL"} ${r.name} (${r.file})`);
    for (const p of r.problems) out.push(`  - ${p}`);
    if (r.outcome && !r.outcome.ok) out.push(`  error: ${r.outcome.error.kind}${r.outcome.error.line ? ` (line ${r.outcome.error.line})` : ""}: ${r.outcome.error.message}`);
    for (const l of r.outcome?.logs ?? []) out.push(`  log ${l.type}: ${l.description}`);
    for (const f of r.outcome?.fetches ?? []) out.push(`  fetch ${f.method} ${f.url} -> ${f.status ?? f.error}`);
  }
  out.push("", `${run.passed} passed, ${run.failed} failed${run.reports.length === 0 ? " (no fixtures found)" : ""}`);
  return out.join("\n") + "\n";
}
