// The fixture format of plugin tests: one recorded request per JSON file (body, headers, secrets,
// invoices, the clock, HTTP answers, the expected result), a directory's `_defaults.json` merged into
// each. Read by the test runner (tools/plugin-test/), the catalogue (catalog.ts) and the console's bench.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

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

export const DEFAULTS_FILE = "_defaults.json";

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
