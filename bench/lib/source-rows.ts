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
 * Writes the customers and their invoices, in chunks so that a store of 100,000s of invoices never holds
 * them all in memory at once. Completed invoices are spread over the year before now, written customer by
 * customer. The pending ones are made now, as a store's are: in the order they will be paid (the k-th of
 * every customer, then the (k+1)-th: acrossCustomers), each customer's among the others', and written in
 * that order, so that the rows a payment touches sit beside those of the payments around it, however long
 * each customer's history. (Written customer by customer, each history customer's pending invoices made a
 * block of their own: the payments in flight, one per customer, each landed on pages of their own, which
 * a store's payments, for invoices made minutes before, do not.)
 */
export async function seedCustomers(rows: SourceRows, spec: CustomerSpec): Promise<SeededCustomers> {
  const out: SeededCustomers = { customerIds: [], pending: [] };
  const now = Date.now();
  const completedEach = spec.invoicesEach - spec.pendingEach;
  const owners: { customerId: string; sessionId: string; customerCreated: number }[] = [];
  const chunk = Math.max(1, Math.floor(20_000 / spec.invoicesEach));
  for (let first = 0; first < spec.customers; first += chunk) {
    const batch = new InvoiceBatch(spec.storeId);
    const customers: Row[] = [];
    const sessions: Row[] = [];
    for (let c = first; c < Math.min(spec.customers, first + chunk); c++) {
      const owner = { customerId: benchId("cus"), sessionId: benchId("ses"), customerCreated: now - 400 * 86_400_000 + c };
      owners.push(owner);
      customers.push({ id: owner.customerId, store_id: spec.storeId, email: `${spec.label}${c}@example.com`, created_at: owner.customerCreated });
      sessions.push({ id: owner.sessionId, store_id: spec.storeId, customer_id: owner.customerId, ip: "", user_agent: "bench", country: "", last_used_at: now, created_at: owner.customerCreated });
      // Distinct times keep page order strict.
      for (let k = 0; k < completedEach; k++) batch.add(owner, "completed", now - YEAR + Math.floor(((c * completedEach + k) / (spec.customers * completedEach)) * YEAR));
      out.customerIds.push(owner.customerId);
      out.pending.push([]);
    }
    await rows.insert("customers", customers);
    await rows.insert("customer_sessions", sessions);
    await batch.write(rows);
  }
  let batch = new InvoiceBatch(spec.storeId);
  for (let k = 0; k < spec.pendingEach; k++) {
    for (let c = 0; c < spec.customers; c++) {
      out.pending[c]!.push(batch.add(owners[c]!, "pending", now + k * spec.customers + c));
      if (batch.size >= 20_000) {
        await batch.write(rows);
        batch = new InvoiceBatch(spec.storeId);
      }
    }
  }
  await batch.write(rows);
  return out;
}

/** Invoices with their item and their log line, written together. */
class InvoiceBatch {
  private readonly invoices: Row[] = [];
  private readonly items: Row[] = [];
  private readonly logs: Row[] = [];
  private readonly storeId: string;
  constructor(storeId: string) {
    this.storeId = storeId;
  }

  get size(): number {
    return this.invoices.length;
  }

  /** Adds an invoice of `owner` made at `createdAt`; its id. */
  add(owner: { customerId: string; sessionId: string; customerCreated: number }, status: "pending" | "completed", createdAt: number): string {
    // Timed by its creation, as the service's invoice ids are: a payment's rows keyed by the invoice land
    // among those of the invoices made about when it was (random ids put each on a page of its own).
    const id = newTimedId("inv", createdAt);
    this.invoices.push(invoiceRow(id, this.storeId, owner.customerId, owner.sessionId, status, createdAt));
    this.items.push(itemRow(id, this.storeId, owner.customerId, createdAt, owner.customerCreated));
    this.logs.push({ invoice_id: id, log: "Invoice created (pending)", type: "info", created_at: createdAt });
    return id;
  }

  async write(rows: SourceRows): Promise<void> {
    await rows.insert("invoices", this.invoices);
    await rows.insert("invoice_items", this.items);
    await rows.insert("invoice_logs", this.logs);
  }
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
