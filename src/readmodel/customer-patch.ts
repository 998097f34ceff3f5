// SQLite: a big customer document brought up to date in place. A customer with thousands of invoices has a
// document of a megabyte, and rebuilding it for one invoice's new status read and serialized all of them
// (~15-25 ms). When every change waiting for the document is a write to one of its invoices (their marks
// name the invoice, migration 0027), the document is patched instead: each such invoice's entry is written
// again from its row, and the order figures from an aggregate of the completed invoices. The text is then
// exactly what a rebuild writes (JSON.stringify of assembleCustomers): the entries and the figures are made
// by the same functions, and an entry is replaced only where it keeps its place in the list.
//
// Anything else is left to a rebuild (null): an invoice that is gone, new to the customer or moved away, one
// whose creation time changed (its place in the list), figures a double cannot hold exactly, or a document
// that does not have the shape expected.
//
// Finding an entry in the text: inside a JSON string every quote is escaped, so `{"id":`, `,"totalInUsd":`
// and `"createdAt":"` with bare quotes occur only where the document's structure puts them.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { type CompletedOrders, orderFigures } from "./customer-documents.ts";
import { INVOICE_COLUMNS, type InvoiceRow, toCustomerInvoice } from "./invoice-documents.ts";
import { oneOf } from "./paging.ts";

/** A document this large is patched when it can be; a smaller one is rebuilt (cheap, and the one path). */
export const PATCH_FROM_BYTES = 64 * 1024;

const FIGURES_START = '"totalOrders":';
const AFTER_FIGURES = ',"email":';
const INVOICES_START = ',"invoices":[';
const ENTRY_START = '{"id":';
const AFTER_ENTRY_ID = ',"totalInUsd":';
const CREATED_AT = '"createdAt":"';

/** Cents summed beyond this are not the exact sum as a double: the rebuild's own sum is the definition. */
const EXACT_CENTS = 2 ** 53;

/**
 * The customer's document `body` with the entries of `invoices` (rows of this customer, read after the
 * document's marks) and its order figures (`completed`) brought up to date, or null when it must be rebuilt.
 */
export function patchCustomerDocument(body: string, customerId: string, invoices: readonly InvoiceRow[], completed: CompletedOrders): string | null {
  const head = `{"id":${JSON.stringify(customerId)},`;
  if (!body.startsWith(head) || !body.startsWith(FIGURES_START, head.length)) return null;
  const figuresEnd = body.indexOf(AFTER_FIGURES, head.length);
  const list = body.indexOf(INVOICES_START, figuresEnd);
  if (figuresEnd < 0 || list < 0 || !Number.isSafeInteger(completed.spentCents) || Math.abs(completed.spentCents) >= EXACT_CENTS) return null;

  const edits: [start: number, end: number, text: string][] = [[head.length, figuresEnd, JSON.stringify(orderFigures(completed)).slice(1, -1)]];
  // The entries to replace, by the JSON text of their id as the list holds it.
  const wanted = new Map<string, InvoiceRow>();
  for (const row of invoices) {
    if (row.customer_id !== customerId) return null;
    wanted.set(JSON.stringify(row.id), row);
  }
  // One walk of the list, entry to entry, until every wanted one is found (a customer paid a hundred times
  // since the last patch costs one walk, not a hundred searches of the megabyte).
  let at = list + INVOICES_START.length;
  for (let found = 0; found < wanted.size; ) {
    const start = body.indexOf(ENTRY_START, at);
    const idEnd = start < 0 ? -1 : body.indexOf(AFTER_ENTRY_ID, start);
    if (idEnd < 0) return null;
    const row = wanted.get(body.slice(start + ENTRY_START.length, idEnd));
    at = idEnd;
    if (row === undefined) continue;
    const created = body.indexOf(CREATED_AT, idEnd);
    const close = created < 0 ? -1 : body.indexOf('"', created + CREATED_AT.length);
    if (close < 0 || body[close + 1] !== "}") return null;
    const end = close + 2;
    const entry = JSON.stringify(toCustomerInvoice(row));
    // The list is in creation order (newest first, then by id): the same creation time keeps the place.
    if (!entry.endsWith(body.slice(created, end))) return null;
    edits.push([start, end, entry]);
    found++;
    at = end;
  }
  let out = "";
  at = 0;
  for (const [start, end, text] of edits) {
    out += body.slice(at, start) + text;
    at = end;
  }
  return out + body.slice(at);
}

/**
 * The patched documents of these customers (id → the invoices their marks name), read in the caller's read
 * transaction, after the marks: those that could be patched, by id; the others are left to a rebuild.
 */
export async function patchedCustomerBodies(db: Kysely<Database>, named: ReadonlyMap<string, readonly string[]>): Promise<Map<string, string>> {
  const patched = new Map<string, string>();
  if (named.size === 0) return patched;
  const customerIds = [...named.keys()];
  const invoiceIds = [...new Set([...named.values()].flat())];
  const [stored, rows, completed] = await Promise.all([
    db.selectFrom("customer_views").select(["id", "body"]).where(oneOf(db, "id", customerIds)).execute(),
    db.selectFrom("invoices").select(INVOICE_COLUMNS).where(oneOf(db, "id", invoiceIds)).execute(),
    db
      .selectFrom("invoices")
      .select((eb) => ["customer_id", eb.fn.countAll<number>().as("orders"), eb.fn.sum<number>("total_cents").as("spent"), eb.fn.min("created_at").as("first"), eb.fn.max("created_at").as("last")])
      .where(oneOf(db, "customer_id", customerIds))
      .where("status", "=", "completed")
      .groupBy("customer_id")
      .execute(),
  ]);
  const rowOf = new Map(rows.map((r) => [r.id, r]));
  const completedOf = new Map(completed.map((c) => [c.customer_id, { orders: Number(c.orders), spentCents: Number(c.spent), first: c.first, last: c.last }]));
  for (const { id, body } of stored) {
    const changed = named.get(id)!.map((invoiceId) => rowOf.get(invoiceId));
    // An invoice gone (deleted, or its id changed) leaves an entry only a rebuild removes.
    if (body === null || changed.some((r) => r === undefined)) continue;
    const text = patchCustomerDocument(body, id, changed as InvoiceRow[], completedOf.get(id) ?? { orders: 0, spentCents: 0, first: null, last: null });
    if (text !== null) patched.set(id, text);
  }
  return patched;
}
