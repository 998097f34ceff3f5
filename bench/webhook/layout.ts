// The webhook benchmark's data, built through interfaces every version of the service keeps: the admin
// HTTP API (stores, plugin installations, API keys), plain rows in the source tables (customers and their
// invoices, bench/lib/source-rows.ts) and the `storefront seed` command. Never the application's internal
// functions: the same layout is built on this checkout and on the baseline's.
//
// Stores and what each case pays:
//   push     one store; customers with 5 pending invoices each, paid one invoice of each customer in turn
//            (payments in flight are for different customers). Also the store of `ignore`.
//   history  in the same store, `historyCustomers` customers with `historyInvoices` invoices each (the oldest
//            completed, the newest `invoices / historyCustomers` pending), paid round-robin over those
//            customers. With 32 of them, one per connection, each payment in flight is again for a different
//            customer: the two cases differ in the size of the customer's history only.
//   stores   `stores` more stores, each with its own plugin installation and customers with 5 pending
//            invoices; payments round-robin over the stores.
//   reads    a store of its own: customers with 5 pending invoices (the burst's payments) and
//            `readsCustomers` realistic ones from `storefront seed`, read through an API key.
//
// Rows written behind the service's back leave the read model's documents empty (the triggers empty them).
// For the payment cases that is harmless: today a payment rebuilds its invoice's and customer's documents
// whatever they held. The reads must read real documents, so the reads store ends with `storefront seed
// --store`, whose last step builds every document of the store; a version that brings documents up to date
// in a projector instead is waited for (server.ts: until storefront_readmodel_backlog is 0).
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import type { BenchDatabase } from "../lib/bench-database.ts";
import { acrossCustomers, openSourceRows, seedCustomers, type SourceRows } from "../lib/source-rows.ts";
import { LUA_PLUGIN, SECRET } from "./plugin.ts";
import type { Layout, Payments } from "./protocol.ts";

export const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const INVOICES_PER_CUSTOMER = 5;

export interface LayoutOptions {
  /** Pending invoices per payment case (each round pays its own slice). */
  invoices: number;
  stores: number;
  historyCustomers: number;
  historyInvoices: number;
  readsCustomers: number;
  plainTs: boolean;
}

/** The part of a Fastify instance the layout needs: `inject`. */
export interface Injector {
  inject(request: { method: "GET" | "POST" | "PUT"; url: string; headers?: Record<string, string>; payload?: unknown }): Promise<{ statusCode: number; body: string; json(): unknown }>;
}

async function call<T>(app: Injector, method: "GET" | "POST" | "PUT", url: string, payload?: unknown, headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }): Promise<T> {
  const response = await app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  if (response.statusCode >= 300) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body.slice(0, 300)}`);
  return response.json() as T;
}

/** A store with the benchmark's Stripe-style plugin installed, through the admin API. */
async function storeWithPlugin(app: Injector, name: string): Promise<string> {
  const store = await call<{ id: string }>(app, "POST", "/api/admin/stores", { name });
  await call(app, "PUT", `/api/admin/stores/${store.id}/plugins/stripe`, { source: LUA_PLUGIN, secrets: { signingSecret: SECRET } });
  return store.id;
}

async function fiveEach(rows: SourceRows, storeId: string, invoices: number, label: string): Promise<Payments> {
  const seeded = await seedCustomers(rows, { storeId, customers: Math.ceil(invoices / INVOICES_PER_CUSTOMER), invoicesEach: INVOICES_PER_CUSTOMER, pendingEach: INVOICES_PER_CUSTOMER, label });
  return { storeId, invoiceIds: acrossCustomers(seeded.pending) };
}

export interface BuiltLayout extends Omit<Layout, "port" | "readModelGauges" | "postgresApplicationName" | "sqliteFile"> {
  /** Builds the reads' page list once the read model is settled (a version with a projector: after it). */
  walkPages(): Promise<{ invoices: string[]; customers: string[] }>;
}

export async function buildLayout(app: Injector, database: BenchDatabase, root: string, env: Record<string, string>, options: LayoutOptions): Promise<BuiltLayout> {
  const setupSeconds: Record<string, number> = {};
  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const value = await fn();
    setupSeconds[name] = Math.round((performance.now() - started) / 100) / 10;
    return value;
  };
  const { main, stores, reads, plainTs, key } = await step("stores", async () => {
    const storeIds: string[] = [];
    for (let i = 0; i < options.stores; i++) storeIds.push(await storeWithPlugin(app, `bench store ${i}`));
    const readsStore = await storeWithPlugin(app, "bench reads");
    const created = await call<{ key: string }>(app, "POST", `/api/admin/stores/${readsStore}/keys`, {});
    return {
      main: await storeWithPlugin(app, "bench"),
      stores: storeIds,
      reads: readsStore,
      plainTs: options.plainTs ? await storeWithPlugin(app, "bench plain TypeScript") : null,
      key: created.key,
    };
  });
  const rows = await openSourceRows(database, root);
  let layout: Omit<BuiltLayout, "walkPages">;
  try {
    const push = await step("push", () => fiveEach(rows, main, options.invoices, "p"));
    const history = await step("history", async () => {
      const pendingEach = Math.min(options.historyInvoices, Math.ceil(options.invoices / options.historyCustomers));
      const seeded = await seedCustomers(rows, { storeId: main, customers: options.historyCustomers, invoicesEach: options.historyInvoices, pendingEach, label: "h" });
      return { storeId: main, invoiceIds: acrossCustomers(seeded.pending) };
    });
    const perStore = Math.ceil(options.invoices / Math.max(1, options.stores));
    const many = await step("stores-rows", async () => {
      const out: Payments[] = [];
      for (const [i, storeId] of stores.entries()) out.push(await fiveEach(rows, storeId, perStore, `s${i}-`));
      return out;
    });
    const readsPayments = await step("reads-rows", () => fiveEach(rows, reads, options.invoices, "r"));
    layout = { push, history, stores: many, reads: { ...readsPayments, key, pages: { invoices: [], customers: [] } }, plainTs, setupSeconds };
  } finally {
    await rows.close();
  }
  await step("reads-seed", () => seedCommand(root, env, reads, options.readsCustomers));
  return { ...layout, walkPages: () => step("reads-pages", () => walkPages(app, key)) };
}

/** `storefront seed --store`: realistic customers, then every document of the store built. */
async function seedCommand(root: string, env: Record<string, string>, storeId: string, customers: number): Promise<void> {
  const child = spawn(process.execPath, [path.join(root, "src", "main.ts"), "seed", "--store", storeId, "--customers", String(Math.max(1, customers)), "--seed", "7", "--json"], {
    cwd: os.tmpdir(), // no stray .env
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", resolve);
  });
  if (code !== 0) throw new Error(`storefront seed exited ${code}: ${stderr.slice(-500)}`);
}

/** Every invoices and customers page of the reads store, 100 a page, as paths with their cursors. */
async function walkPages(app: Injector, key: string): Promise<{ invoices: string[]; customers: string[] }> {
  const pages = { invoices: [] as string[], customers: [] as string[] };
  for (const list of ["invoices", "customers"] as const) {
    let cursor: string | null = null;
    do {
      const url: string = `/api/service/${list}?limit=100${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page = await call<{ pagination: { nextCursor: string | null } }>(app, "GET", url, undefined, { authorization: key });
      pages[list].push(url);
      cursor = page.pagination.nextCursor;
    } while (cursor !== null);
  }
  return pages;
}
