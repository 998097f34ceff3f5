// The command line asking the running service instead of the database, for what only the service should
// decide or do: an endpoint URL checked against the service's own ENDPOINT_ALLOW, an example event sent
// from the service, a payment webhook posted to it. The service is found at http://HOST:PORT of this
// configuration (the same .env as the server), or at --server.
import type { Config } from "../config.ts";
import { AppError, type ErrorCode, errorStatus } from "../errors.ts";
import type { Services } from "../services.ts";
import { CliError, cliConfig, withServices } from "./context.ts";

/** How long the command waits to learn whether a service answers before working without it. */
const PROBE_TIMEOUT_MS = 1500;

/** The running service's base URL: --server, else this configuration's HOST and PORT (a wildcard HOST is reached on loopback). */
export function serviceUrl(config: Readonly<Config>, server?: string): string {
  if (server !== undefined) {
    try {
      const url = new URL(server);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("scheme");
      return url.origin;
    } catch {
      throw new CliError(`--server ${server} is not an http(s) URL, e.g. http://127.0.0.1:3000`);
    }
  }
  const host = config.host === "0.0.0.0" ? "127.0.0.1" : config.host === "::" ? "[::1]" : config.host.includes(":") ? `[${config.host}]` : config.host;
  return `http://${host}:${config.port}`;
}

export interface AdminClient {
  url: string;
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

/** Whether a storefront service answers at `url` (its /healthz). */
export async function serviceAnswers(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

/**
 * The running service's admin API, when this configuration has ADMIN_TOKEN and the service answers; null
 * otherwise (the command then works on the database). Errors the service answers come back as AppErrors.
 */
export async function adminClient(config: Readonly<Config>, server?: string): Promise<AdminClient | null> {
  if (config.adminToken === null) return null;
  const url = serviceUrl(config, server);
  if (!(await serviceAnswers(url))) {
    if (server !== undefined) throw new CliError(`no storefront service answers at ${url}`);
    return null;
  }
  const token = config.adminToken;
  return {
    url,
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      const r = await fetch(`${url}/api/admin${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await r.text();
      const json = text === "" ? null : (JSON.parse(text) as unknown);
      if (r.ok) return json as T;
      const error = (json as { error?: { code?: string; message?: string; param?: string } } | null)?.error;
      const code = error?.code !== undefined && error.code in errorStatus ? (error.code as ErrorCode) : null;
      if (code === null) throw new CliError(`the service at ${url} answered ${r.status}: ${text.slice(0, 200)}`);
      throw new AppError(code, error?.message ?? `HTTP ${r.status}`, error?.param !== undefined ? { param: error.param } : {});
    },
  };
}

/** Commands that may ask the running service take --server. */
export interface ServerOption {
  server?: string;
}

export const SERVICE_HELP =
  "\nWith ADMIN_TOKEN set (here as for the server, e.g. in .env) and the service answering at http://HOST:PORT (or --server),\n" +
  "the command asks the service: its ENDPOINT_ALLOW decides which addresses are allowed. Otherwise it works on the\n" +
  "database, under this environment's ENDPOINT_ALLOW. To receive webhooks on this machine: docs/events.md, 'Testing on your machine'.\n";

/**
 * Through the running service's admin API when it answers (ADMIN_TOKEN set), else on the database with this
 * environment's settings. A URL refused here says how to have it allowed.
 */
export async function viaServiceOrDatabase<T>(server: string | undefined, viaService: (client: AdminClient) => Promise<T>, viaDatabase: (services: Services) => Promise<T>): Promise<T> {
  const client = await adminClient(cliConfig(), server);
  if (client !== null) return viaService(client);
  try {
    return await withServices(viaDatabase);
  } catch (err) {
    if (err instanceof AppError && err.param === "url" && err.message.includes("private or reserved")) {
      throw new AppError(err.code, `${err.message}; on this machine: start the server with ENDPOINT_ALLOW=<host>:<port> and set ADMIN_TOKEN for both (the command then asks the server), see docs/events.md`, { param: "url" });
    }
    throw err;
  }
}
