// Shared fixtures of the sandbox tests: a run input built from a Lua source, a host with a few
// invoices, and small local HTTP servers for fetch.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { RunInput, RunOutcome, Sandbox, SandboxHost } from "../../src/sandbox/index.ts";

export const invoices: Record<string, unknown> = {
  inv_1: { id: "inv_1", status: "pending", totalInUsd: 49.99, couponId: null, invoiceItems: [{ productVariantId: "pv_1", quantity: 1 }], invoiceFields: [] },
};

export const host: SandboxHost = {
  getInvoice: (id) => Promise.resolve(invoices[id] ?? null),
};

export function input(source: string, overrides: Partial<Omit<RunInput, "request">> & { request?: Partial<RunInput["request"]> } = {}): RunInput {
  return {
    source,
    request: {
      method: "POST",
      body: Buffer.from('{"id":"evt_1","data":{"invoiceId":"inv_1"}}'),
      headers: { "content-type": "application/json", "x-signature": "abc" },
      query: { storeId: "st_1", pluginName: "test" },
      ...overrides.request,
    },
    store: overrides.store ?? { id: "st_1" },
    plugin: overrides.plugin ?? { name: "test", version: 3 },
    secrets: overrides.secrets ?? { signingSecret: "whsec_test", apiKey: "k_123" },
  };
}

/** Runs `source` and returns its outcome. */
export function run(sandbox: Sandbox, source: string, overrides: Parameters<typeof input>[1] = {}, runHost: SandboxHost = host): Promise<RunOutcome> {
  return sandbox.run(input(source, overrides), runHost);
}

/** Runs a script whose result carries a value back in invoiceId: `return {status="ignore", invoiceId=tostring(x)}`. */
export async function evaluate(sandbox: Sandbox, expression: string, overrides: Parameters<typeof input>[1] = {}): Promise<string> {
  const outcome = await run(sandbox, `return { status = "ignore", invoiceId = tostring(${expression}) }`, overrides);
  assert.ok(outcome.ok, `expected ${expression} to evaluate, got ${JSON.stringify(outcome)}`);
  assert.equal(outcome.result.status, "ignore");
  return outcome.result.invoiceId ?? "";
}

/** Runs a chunk whose body returns a string (a whole script written for stock Lua), and returns that string. */
export async function returned(sandbox: Sandbox, source: string): Promise<string> {
  const outcome = await run(sandbox, `local result = (function() ${source} end)()\nreturn { status = "ignore", invoiceId = result }`);
  assert.ok(outcome.ok, `chunk failed: ${JSON.stringify(outcome)}\n${source}`);
  return outcome.result.invoiceId ?? "";
}

export function expectError(outcome: RunOutcome, kind: string, message?: RegExp): void {
  assert.equal(outcome.ok, false, `expected a ${kind}, got ${JSON.stringify(outcome)}`);
  if (outcome.ok) return;
  assert.equal(outcome.error.kind, kind, `expected ${kind}, got ${JSON.stringify(outcome.error)}`);
  if (message) assert.match(outcome.error.message, message);
}

export const NORMAL = `
local sig = hmacShaSign(secrets.signingSecret, request.body, "sha256")
log("checked " .. #sig)
return { status = "pushInvoice", invoiceId = request.json.data.invoiceId }`;

/** The normal script still runs correctly (asserted after every hostile one). */
export async function assertHealthy(sandbox: Sandbox): Promise<void> {
  const outcome = await run(sandbox, NORMAL);
  assert.deepEqual(outcome.ok && outcome.result, { status: "pushInvoice", invoiceId: "inv_1" }, `normal script failed: ${JSON.stringify(outcome)}`);
  assert.deepEqual(outcome.logs.map((l) => l.description), ["checked 64"]);
}

export interface TestServer {
  url: string;
  port: number;
  requests: http.IncomingMessage[];
  close(): Promise<void>;
}

/** An HTTP server on 127.0.0.1 answering with `handler`. */
export async function startServer(handler: http.RequestListener, host = "127.0.0.1"): Promise<TestServer> {
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
