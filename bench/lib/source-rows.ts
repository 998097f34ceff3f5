// Customers with invoices written straight into the source tables (customers, customer_sessions, invoices,
// invoice_items, invoice_logs) over a connection of the benchmark's own, as a checkout leaves them: a session
// per customer, one item and the "Invoice created" log line per invoice. Only those tables' columns are
// relied on (stable across versions), never the application's internals, so the same seeding serves any
// checkout of the service. The read model's triggers fire as for any write; its documents are left to
// whatever that version does with rows written behind its back (see bench/webhook/layout.ts). An invoice's id
// is made as the service makes it (this checkout's src/lib/ids.ts: timed by its creation).
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import pg from "pg";
import { newTimedId } from "../../src/lib/ids.ts";
import type { BenchDatabase } from "./bench-database.ts";

type Row = Record<string, string | number | null>;

export interface SourceRows {
  insert(table: string, rows: Row[]): Promise<void>;
  close(): Promise<void>;
}

const YEAR = 365 * 86_400_000;
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
/** An id in the service's format: a type prefix and 20 base32 characters. */
export function benchId(prefix: string): string {
  const bytes = randomBytes(20);
  let out = `${prefix}_`;
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

/**
 * `root`: the checkout whose app has the database open in this process. On SQLite its own copy of
 * better-sqlite3 must be used: two copies of SQLite in one process do not see each other's POSIX locks, and
 * closing one's connection drops the other's (https://www.sqlite.org/howtocorrupt.html, 2.2.1).
 */
export async function openSourceRows(database: BenchDatabase, root: string): Promise<SourceRows> {
  if (database.file !== null) return sqliteRows(database.file, createRequire(path.join(root, "package.json"))("better-sqlite3") as typeof BetterSqlite3);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  // Seeding needs no durability: the benchmark's database is thrown away after the run.
  await client.query("set synchronous_commit = off");
  return {
    async insert(table, rows) {
      if (rows.length === 0) return;
      const columns = Object.keys(rows[0]!);
      const per = Math.floor(20_000 / columns.length);
      await client.query("begin");
      for (let i = 0; i < rows.length; i += per) {
        const batch = rows.slice(i, i + per);
        const values = batch.map((_, r) => `(${columns.map((_c, c) => `$${r * columns.length + c + 1}`).join(",")})`);
        await client.query(`insert into ${table} (${columns.join(",")}) values ${values.join(",")}`, batch.flatMap((row) => columns.map((c) => row[c])));
      }
      await client.query("commit");
    },
    close: () => client.end(),
  };
}

function sqliteRows(file: string, Database: typeof BetterSqlite3): SourceRows {
  const db = new Database(file);
  db.pragma("busy_timeout = 10000");
  db.pragma("foreign_keys = ON");
  return {
    async insert(table, rows) {
      if (rows.length === 0) return;
      const columns = Object.keys(rows[0]!);
      const statement = db.prepare(`insert into ${table} (${columns.join(",")}) values (${columns.map((c) => `@${c}`).join(",")})`);
      db.transaction(() => {
        for (const row of rows) statement.run(row);
      })();
    },
    close: async () => {
      db.close();
    },
  };
}

export interface CustomerSpec {
  storeId: string;
  customers: number;
  /** Each customer's invoices: `pending` of them pending (the newest), the rest completed before them. */
  invoicesEach: number;
  pendingEach: number;
  /** Prefix of the customers' e-mail addresses (unique per store). */
  label: string;
}

/** The customers' pending invoice ids, `pending[c][k]` the k-th of customer c. */
export interface SeededCustomers {
  customerIds: string[];
  pending: string[][];
}

/**
 * Writes the customers and their invoices, in chunks of customers so that a store of 100,000s of invoices
 * never holds them all in memory at once. Completed invoices are spread over the year before now.
 */
export async function seedCustomers(rows: SourceRows, spec: CustomerSpec): Promise<SeededCustomers> {
  const out: SeededCustomers = { customerIds: [], pending: [] };
  const chunk = Math.max(1, Math.floor(20_000 / spec.invoicesEach));
  const now = Date.now();
  for (let first = 0; first < spec.customers; first += chunk) {
    const count = Math.min(chunk, spec.customers - first);
    const customers: Row[] = [];
    const sessions: Row[] = [];
    const invoices: Row[] = [];
    const items: Row[] = [];
    const logs: Row[] = [];
    for (let c = first; c < first + count; c++) {
      const customerId = benchId("cus");
      const customerCreated = now - 400 * 86_400_000 + c;
      const sessionId = benchId("ses");
      customers.push({ id: customerId, store_id: spec.storeId, email: `${spec.label}${c}@example.com`, created_at: customerCreated });
      sessions.push({ id: sessionId, store_id: spec.storeId, customer_id: customerId, ip: "", user_agent: "bench", country: "", last_used_at: now, created_at: customerCreated });
      const pending: string[] = [];
      for (let k = 0; k < spec.invoicesEach; k++) {
        const isPending = k >= spec.invoicesEach - spec.pendingEach;
        // Completed history spread over the past year, pending ones now (distinct times keep page order strict).
        const index = c * spec.invoicesEach + k;
        const createdAt = isPending ? now + index : now - YEAR + Math.floor((index / (spec.customers * spec.invoicesEach)) * YEAR);
        // Timed by its creation, as the service's invoice ids are: a payment's rows keyed by the invoice land
        // among those of the invoices made about when it was (random ids put each on a page of its own).
        const id = newTimedId("inv", createdAt);
        invoices.push(invoiceRow(id, spec.storeId, customerId, sessionId, isPending ? "pending" : "completed", createdAt));
        items.push(itemRow(id, spec.storeId, customerId, createdAt, customerCreated));
        logs.push({ invoice_id: id, log: "Invoice created (pending)", type: "info", created_at: createdAt });
        if (isPending) pending.push(id);
      }
      out.customerIds.push(customerId);
      out.pending.push(pending);
    }
    await rows.insert("customers", customers);
    await rows.insert("customer_sessions", sessions);
    await rows.insert("invoices", invoices);
    await rows.insert("invoice_items", items);
    await rows.insert("invoice_logs", logs);
  }
  return out;
}

function invoiceRow(id: string, storeId: string, customerId: string, sessionId: string, status: string, createdAt: number): Row {
  return {
    id,
    store_id: storeId,
    customer_id: customerId,
    total_cents: 4999,
    payment_method: "stripe",
    displayed_payment_info: "",
    created_on_session_id: sessionId,
    left_feedback: 0,
    status,
    discord_id: null,
    discord_email: null,
    created_at: createdAt,
    updated_at: createdAt,
  };
}

function itemRow(invoiceId: string, storeId: string, customerId: string, createdAt: number, customerCreated: number): Row {
  return {
    invoice_id: invoiceId,
    position: 0,
    store_id: storeId,
    customer_id: customerId,
    product_variant_id: "var_bench",
    quantity: 1,
    price_cents: 4999,
    coupon_id: null,
    invoice_created_at: createdAt,
    customer_created_at: customerCreated,
  };
}

/**
 * Pending invoices in payment order: one of each customer in turn (the k-th of every customer, then the
 * (k+1)-th), so that payments in flight at the same time are for different customers.
 */
export function acrossCustomers(pending: string[][]): string[] {
  const out: string[] = [];
  const most = Math.max(0, ...pending.map((p) => p.length));
  for (let k = 0; k < most; k++) for (const p of pending) if (k < p.length) out.push(p[k]!);
  return out;
}
