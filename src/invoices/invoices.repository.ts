// An invoice's own rows (the invoice, its items, custom fields and log lines, the customer session it was
// created on) as statements: checkout's reads and writes, and the snapshot a status change starts from.
// Statements of a transaction take the caller's transaction. The API's reads of invoices are the read
// model's (src/readmodel/invoice-documents.ts).
import { CompiledQuery, type Insertable, type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import type { CustomerSessionsTable, Database, InvoiceFieldsTable, InvoiceItemsTable, InvoiceLogsTable, InvoicesTable } from "../platform/db/schema.ts";
import { INVOICE_COLUMNS, type InvoiceRow } from "../readmodel/invoice-documents.ts";
import { compiledOnce } from "../platform/db/compiled-once.ts";


/** An invoice's source row with its fields, items and log lines: what a transition needs to describe it. */
export interface InvoiceSnapshot {
  row: InvoiceRow;
  fields: { key: string; value: string; type: string }[];
  items: { product_variant_id: string; quantity: number; price_cents: number; coupon_id: string | null }[];
  logs: { log: string; type: string; created_at: number }[];
  /** Whether the event asked about (readPaymentSnapshot's `applied`) was applied to this store before. */
  seen: boolean;
}

/** A provider event, by the plugin that reported it and its key (payment.apply.ts). */
export interface EventKey {
  pluginName: string;
  eventKey: string;
}

/** A new invoice's rows, written together. */
export interface NewInvoice {
  invoice: Insertable<InvoicesTable>;
  items: Insertable<InvoiceItemsTable>[];
  fields: Insertable<InvoiceFieldsTable>[];
  firstLog: Insertable<InvoiceLogsTable>;
}

export interface InvoiceSourceRepository {
  /** The store's customer (its id and when it was created), or null when the store has no such customer. */
  findCustomer(storeId: string, customerId: string): Promise<{ id: string; created_at: number } | null>;
}

export function createInvoiceSourceRepository(db: Kysely<Database>): InvoiceSourceRepository {
  return {
    async findCustomer(storeId, customerId) {
      return (await db.selectFrom("customers").select(["id", "created_at"]).where("id", "=", customerId).where("store_id", "=", storeId).executeTakeFirst()) ?? null;
    },
  };
}

/** Whether the session is one of this customer's. */
export async function isCustomerSession(tx: Transaction<Database>, sessionId: string, customerId: string): Promise<boolean> {
  const own = await tx.selectFrom("customer_sessions").select("id").where("id", "=", sessionId).where("customer_id", "=", customerId).executeTakeFirst();
  return own !== undefined;
}

export async function insertSession(tx: Transaction<Database>, row: Insertable<CustomerSessionsTable>): Promise<void> {
  await tx.insertInto("customer_sessions").values(row).execute();
}

/** The invoice, its items, its fields (when it has any) and its first log line: three or four statements. */
export async function insertInvoice(tx: Transaction<Database>, rows: NewInvoice): Promise<void> {
  await tx.insertInto("invoices").values(rows.invoice).execute();
  await tx.insertInto("invoice_items").values(rows.items).execute();
  if (rows.fields.length > 0) await tx.insertInto("invoice_fields").values(rows.fields).execute();
  await tx.insertInto("invoice_logs").values(rows.firstLog).execute();
}

type Executor = Kysely<Database> | Transaction<Database>;

/**
 * One invoice of this store with all its children, in one statement (their rows aggregated as JSON arrays),
 * whatever the customer's history: the read a status change starts from. On PostgreSQL the arrays come
 * decoded; on SQLite as text.
 */
export async function readInvoiceSnapshot(db: Executor, storeId: string, invoiceId: string): Promise<InvoiceSnapshot | null> {
  const found = await snapshotQuery(db, storeId, invoiceId, undefined).executeTakeFirst();
  return found === undefined ? null : toSnapshot(found);
}

/**
 * The same read, which also says whether the event `applied` names was applied in this store before (a
 * payment's duplicate check); built once (payment.apply.ts: every payment starts with it).
 */
export async function readPaymentSnapshot(db: Executor, storeId: string, invoiceId: string, applied: EventKey): Promise<InvoiceSnapshot | null> {
  const { rows } = await paymentSnapshot(db, { storeId, invoiceId, ...applied });
  return rows[0] === undefined ? null : toSnapshot(rows[0]);
}

/** A payment's invoice and event, for the reads made together (readPaymentSnapshots). */
export interface PaymentKey extends EventKey {
  storeId: string;
  invoiceId: string;
}

/** The arrays of an invoice's children, as JSON arrays of arrays in their order, for the invoice `i`. */
const CHILDREN = [
  { table: "invoice_fields", columns: "key, value, type", order: "position", as: "fields_json" },
  { table: "invoice_items", columns: "product_variant_id, quantity, price_cents, coupon_id", order: "position", as: "items_json" },
  { table: "invoice_logs", columns: "log, type, created_at", order: "id", as: "logs_json" },
] as const;
const childArray = (sqlite: boolean, c: (typeof CHILDREN)[number]) =>
  sqlite
    ? `(select json_group_array(json_array(${c.columns}) order by ${c.order}) from ${c.table} where invoice_id = i.id)`
    : `(select coalesce(json_agg(json_build_array(${c.columns}) order by ${c.order}), '[]'::json) from ${c.table} where invoice_id = i.id)`;

/**
 * PostgreSQL: the payment snapshots of several payments in one statement (each key an element of the
 * arrays; one text whatever their number, prepared once per connection). A key whose invoice is not that
 * store's has no row. It runs with a generic plan (planned without its values, which do not tell it the
 * arrays' length): each invoice is looked up by its key in a lateral subquery (`limit 1`, which keeps the
 * planner from flattening it into a join that it may plan as a hash join over every invoice of the table),
 * and whether the event was applied by a scalar subquery, not `exists`: for an `exists` the planner may
 * choose to hash the whole claims table once per statement, and chose it under payments (the table grows
 * faster than its statistics).
 */
export const PAYMENT_SNAPSHOTS_SQL = `select k.n, ${INVOICE_COLUMNS.map((c) => `i.${c}`).join(", ")},
  ${CHILDREN.map((c) => `${childArray(false, c)} as ${c.as}`).join(",\n  ")},
  coalesce((select true from applied_events a where a.store_id = i.store_id and a.plugin_name = k.plugin_name and a.event_key = k.event_key limit 1), false) as seen
from unnest($1::text[], $2::text[], $3::text[], $4::text[]) with ordinality as k(store_id, invoice_id, plugin_name, event_key, n)
cross join lateral (select ${INVOICE_COLUMNS.join(", ")} from invoices where id = k.invoice_id and store_id = k.store_id limit 1) i`;

/** PostgreSQL: readPaymentSnapshot for each key, in one statement; in the keys' order, null where there is no such invoice. */
export async function readPaymentSnapshots(db: Executor, keys: readonly PaymentKey[]): Promise<(InvoiceSnapshot | null)[]> {
  const params = [keys.map((k) => k.storeId), keys.map((k) => k.invoiceId), keys.map((k) => k.pluginName), keys.map((k) => k.eventKey)];
  const { rows } = await db.executeQuery<SnapshotRow & { n: string | number }>(CompiledQuery.raw(PAYMENT_SNAPSHOTS_SQL, params));
  const snapshots: (InvoiceSnapshot | null)[] = keys.map(() => null);
  for (const { n, ...row } of rows) snapshots[Number(n) - 1] = toSnapshot(row);
  return snapshots;
}

function snapshotQuery(db: Executor, storeId: string, invoiceId: string, applied: EventKey | undefined) {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  return db
    .selectFrom("invoices as i")
    .select(INVOICE_COLUMNS.map((c) => `i.${c}` as const))
    .select([
      ...CHILDREN.map((c) => sql<unknown>`${sql.raw(childArray(sqlite, c))}`.as(c.as)),
      (applied === undefined
        ? sql<boolean>`false`
        : sql<boolean>`exists (select 1 from applied_events a where a.store_id = i.store_id and a.plugin_name = ${applied.pluginName} and a.event_key = ${applied.eventKey})`
      ).as("seen"),
    ])
    .where("i.id", "=", invoiceId)
    .where("i.store_id", "=", storeId);
}

type SnapshotRow = InvoiceRow & { fields_json: unknown; items_json: unknown; logs_json: unknown; seen: boolean };

const paymentSnapshot = compiledOnce<{ storeId: string; invoiceId: string } & EventKey, SnapshotRow>("payment snapshot", (db, param) =>
  snapshotQuery(db, param((i) => i.storeId), param((i) => i.invoiceId), { pluginName: param((i) => i.pluginName), eventKey: param((i) => i.eventKey) }),
);

function toSnapshot(found: SnapshotRow): InvoiceSnapshot {
  const { fields_json, items_json, logs_json, seen, ...row } = found;
  const array = (v: unknown) => (typeof v === "string" ? JSON.parse(v) : v) as unknown[][];
  return {
    row,
    fields: array(fields_json).map(([key, value, type]) => ({ key: String(key), value: String(value), type: String(type) })),
    items: array(items_json).map(([variant, quantity, price, coupon]) => ({ product_variant_id: String(variant), quantity: Number(quantity), price_cents: Number(price), coupon_id: coupon == null ? null : String(coupon) })),
    logs: array(logs_json).map(([log, type, at]) => ({ log: String(log), type: String(type), created_at: Number(at) })),
    seen: Boolean(seen),
  };
}
