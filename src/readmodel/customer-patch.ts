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
// and `"createdAt":"` with bare quotes occur only where the document's structure puts them; and in UTF-8 no
// byte of a character beyond ASCII is an ASCII byte, so the same holds of the text's bytes.
//
// The document goes as bytes, never as a JavaScript string: read as its UTF-8 bytes, patched by copying
// those bytes around the edits, moved to the writer's thread without a copy and written as text
// (projector.ts). A megabyte decoded into a string, cloned between threads and encoded again took ~20 ms of
// the machine's time on each rebuild (a slow guest, where every fresh megabyte of memory is page faults).
import { type Kysely, sql } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { type CompletedOrders, orderFigures } from "./customer-documents.ts";
import { INVOICE_COLUMNS, type InvoiceRow, toCustomerInvoice } from "./invoice-documents.ts";
import { oneOf } from "./paging.ts";

/** A document this large is patched when it can be; a smaller one is rebuilt (cheap, and the one path). */
export const PATCH_FROM_BYTES = 64 * 1024;

const bytes = (text: string) => Buffer.from(text, "utf8");
const FIGURES_START = bytes('"totalOrders":');
const AFTER_FIGURES = bytes(',"email":');
const INVOICES_START = bytes(',"invoices":[');
const ENTRY_START = bytes('{"id":');
const AFTER_ENTRY_ID = bytes(',"totalInUsd":');
const CREATED_AT = bytes('"createdAt":"');
const QUOTE = 0x22;
const CLOSE_BRACE = 0x7d;

/** Cents summed beyond this are not the exact sum as a double: the rebuild's own sum is the definition. */
const EXACT_CENTS = 2 ** 53;

const startsWithAt = (body: Buffer, prefix: Buffer, at: number) => body.length >= at + prefix.length && body.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;

/**
 * The customer's document `body` (its UTF-8 bytes) with the entries of `invoices` (rows of this customer,
 * read after the document's marks) and its order figures (`completed`) brought up to date, as new bytes of
 * their own (never a view of a shared pool: they move between threads), or null when it must be rebuilt.
 */
export function patchCustomerDocument(body: Buffer, customerId: string, invoices: readonly InvoiceRow[], completed: CompletedOrders): Buffer | null {
  const head = bytes(`{"id":${JSON.stringify(customerId)},`);
  if (!startsWithAt(body, head, 0) || !startsWithAt(body, FIGURES_START, head.length)) return null;
  const figuresEnd = body.indexOf(AFTER_FIGURES, head.length);
  const list = figuresEnd < 0 ? -1 : body.indexOf(INVOICES_START, figuresEnd);
  if (list < 0 || !Number.isSafeInteger(completed.spentCents) || Math.abs(completed.spentCents) >= EXACT_CENTS) return null;

  const edits: [start: number, end: number, text: Buffer][] = [[head.length, figuresEnd, bytes(JSON.stringify(orderFigures(completed)).slice(1, -1))]];
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
    const row = wanted.get(body.toString("utf8", start + ENTRY_START.length, idEnd));
    at = idEnd;
    if (row === undefined) continue;
    const created = body.indexOf(CREATED_AT, idEnd);
    const close = created < 0 ? -1 : body.indexOf(QUOTE, created + CREATED_AT.length);
    if (close < 0 || body[close + 1] !== CLOSE_BRACE) return null;
    const end = close + 2;
    const entry = bytes(JSON.stringify(toCustomerInvoice(row)));
    // The list is in creation order (newest first, then by id): the same creation time keeps the place.
    const tail = end - created;
    if (entry.length < tail || entry.compare(body, created, end, entry.length - tail) !== 0) return null;
    edits.push([start, end, entry]);
    found++;
    at = end;
  }
  const pieces: Buffer[] = [];
  at = 0;
  for (const [start, end, text] of edits) {
    pieces.push(body.subarray(at, start), text);
    at = end;
  }
  pieces.push(body.subarray(at));
  const length = pieces.reduce((n, p) => n + p.length, 0);
  // Its own memory whatever its size (Buffer.concat takes a small one from the shared pool).
  const out = Buffer.allocUnsafeSlow(length);
  let offset = 0;
  for (const p of pieces) offset += p.copy(out, offset);
  return out;
}

/**
 * The patched documents of these customers (id → the invoices their marks name), read in the caller's read
 * transaction, after the marks: those that could be patched, by id, as bytes; the others are left to a rebuild.
 */
export async function patchedCustomerBodies(db: Kysely<Database>, named: ReadonlyMap<string, readonly string[]>): Promise<Map<string, Buffer>> {
  const patched = new Map<string, Buffer>();
  if (named.size === 0) return patched;
  const customerIds = [...named.keys()];
  const invoiceIds = [...new Set([...named.values()].flat())];
  const [stored, rows, completed] = await Promise.all([
    // The text's bytes as they are stored (a blob is read without decoding it into a string).
    db.selectFrom("customer_views").select(["id", sql<Buffer | null>`cast(body as blob)`.as("body")]).where(oneOf(db, "id", customerIds)).execute(),
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
