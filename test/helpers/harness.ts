// Test harness: the real app (buildApp + app.inject) on a real database — a fresh SQLite file, or a fresh
// schema in the local PostgreSQL — with a controllable clock. The same suites run on both dialects.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { buildApp } from "../../src/app.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import { createServices, type ServiceOptions, type Services } from "../../src/services.ts";
import { randomBase32 } from "../../src/lib/ids.ts";

export type DialectName = "sqlite" | "postgres";

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const ADMIN_TOKEN = "test-admin-token-0123456789";

async function probePostgres(): Promise<string | null> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("select 1");
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await client.end().catch(() => {});
  }
}

const pgProblem = await probePostgres();
if (pgProblem !== null) {
  if (process.env.CI) throw new Error(`PostgreSQL at ${PG_ADMIN_URL} is required in CI: ${pgProblem}`);
  process.stderr.write(
    `\n!!! PostgreSQL is not reachable at ${PG_ADMIN_URL} (${pgProblem}).\n!!! SKIPPING every PostgreSQL test. Start PostgreSQL or set TEST_PG_URL to run them.\n\n`,
  );
}

/** Why the PostgreSQL suites are skipped, or false when they run. */
export const pgSkip: string | false = pgProblem === null ? false : `PostgreSQL not reachable at ${PG_ADMIN_URL}: SKIPPED`;

export const DIALECTS: { name: DialectName; skip: string | false }[] = [
  { name: "sqlite", skip: false },
  { name: "postgres", skip: pgSkip },
];

export interface Clock {
  now: () => number;
  set(ms: number | string): void;
  advance(ms: number): void;
}

export function createClock(start = Date.parse("2024-01-01T00:00:00.000Z")): Clock {
  let t = start;
  return {
    now: () => t,
    set: (ms) => {
      t = typeof ms === "string" ? Date.parse(ms) : ms;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/** A fresh, empty database for one dialect: its DATABASE_URL and how to drop it. */
export async function freshDatabase(dialect: DialectName): Promise<{ url: string; drop: () => Promise<void> }> {
  if (dialect === "sqlite") {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-test-"));
    return { url: `sqlite:${path.join(dir, "test.db")}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `t_${randomBase32(12)}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.searchParams.set("options", `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`drop schema if exists ${schema} cascade`);
      await c.end();
    },
  };
}

export interface Harness {
  dialect: DialectName;
  app: FastifyInstance;
  services: Services;
  config: Readonly<Config>;
  clock: Clock;
  databaseUrl: string;
  admin(method: "GET" | "POST" | "PUT" | "DELETE", url: string, payload?: unknown): Promise<LightMyRequestResponse>;
  get(url: string, apiKey?: string | null, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** A store with a full-scope key. */
  store(name?: string): Promise<{ id: string; key: string }>;
  customer(storeId: string, body?: Record<string, unknown>): Promise<{ id: string }>;
  checkout(storeId: string, body: Record<string, unknown>): Promise<Record<string, unknown> & { id: string }>;
  close(): Promise<void>;
}

export async function createHarness(dialect: DialectName, env: Record<string, string> = {}, serviceOptions: Omit<ServiceOptions, "now"> = {}): Promise<Harness> {
  const database = await freshDatabase(dialect);
  const config = loadConfig({
    DATABASE_URL: database.url,
    ADMIN_TOKEN,
    LOG_LEVEL: "silent",
    PLUGIN_POOL_SIZE: "2",
    SECRETS_KEY: randomBytes(32).toString("hex"),
    ...env,
  });
  const clock = createClock();
  const services = await createServices(config, { ...serviceOptions, now: clock.now });
  const app = await buildApp(services, { logger: false });
  await app.ready();

  const harness: Harness = {
    dialect,
    app,
    services,
    config,
    clock,
    databaseUrl: database.url,
    admin: (method, url, payload) =>
      app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
      }),
    get: (url, apiKey, headers = {}) =>
      app.inject({ method: "GET", url, headers: { ...(apiKey ? { authorization: apiKey } : {}), ...headers } }),
    async store(name = "Test store") {
      const s = await harness.admin("POST", "/api/admin/stores", { name });
      expectStatus(s, 201);
      const k = await harness.admin("POST", `/api/admin/stores/${s.json<{ id: string }>().id}/keys`, {});
      expectStatus(k, 201);
      return { id: s.json<{ id: string }>().id, key: k.json<{ key: string }>().key };
    },
    async customer(storeId, body = {}) {
      const r = await harness.admin("POST", `/api/admin/stores/${storeId}/customers`, { email: `c${randomBase32(6)}@example.com`, ...body });
      expectStatus(r, 201);
      return r.json<{ id: string }>();
    },
    async checkout(storeId, body) {
      const r = await harness.admin("POST", `/api/admin/stores/${storeId}/invoices`, body);
      expectStatus(r, 201);
      return r.json<Record<string, unknown> & { id: string }>();
    },
    async close() {
      await app.close();
      await services.close();
      await database.drop();
    },
  };
  return harness;
}

export function expectStatus(res: LightMyRequestResponse, status: number): void {
  if (res.statusCode !== status) throw new Error(`expected HTTP ${status}, got ${res.statusCode}: ${res.body.slice(0, 500)}`);
}
