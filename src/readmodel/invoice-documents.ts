// Reads invoices as the API shows them. A page's ids come from the page index (or, with filters, from
// their indexes), its documents from the read model's stored JSON of those ids (src/readmodel/documents.ts). An invoice
// whose document is missing (a write that did not refresh it) is assembled from the source tables, three
// more queries for those invoices only.
import type { Kysely, Selectable } from "kysely";
import type { Database, InvoicesTable } from "../platform/db/schema.ts";
import { type Cursor, type ListQuery, isoTime } from "../lib/list-query.ts";
import { centsToUsd } from "../lib/money.ts";
import { pageShapes } from "./page-shapes.ts";
import { type Page, type PageSource, documentsInPageOrder, groupBy, oneOf, type PageKeys, pageElements, pageFetch, pageQuery, readPage, storeCondition, windowConditions } from "./paging.ts";
import type { CustomerInvoice, Invoice } from "../schemas/invoices.schemas.ts";

export type InvoiceRow = Selectable<InvoicesTable>;

/**
 * Every column of an invoice, named: a statement that names its columns is prepared once per connection
 * on PostgreSQL, one with `select *` never (its row type would follow a column added by an upgrade; see
 * database.ts).
 */
export const INVOICE_COLUMNS = [
  "id",
  "store_id",
  "customer_id",
  "total_cents",
  "payment_method",
  "displayed_payment_info",
  "created_on_session_id",
  "left_feedback",
  "status",
  "discord_id",
  "discord_email",
  "created_at",
  "updated_at",
] as const satisfies readonly (keyof InvoiceRow)[];

export function toCustomerInvoice(row: InvoiceRow): CustomerInvoice {
  return {
    id: row.id,
    totalInUsd: centsToUsd(row.total_cents),
    paymentMethod: row.payment_method,
    displayedPaymentInfo: row.displayed_payment_info,
    createdOnSessionId: row.created_on_session_id,
    leftFeedback: row.left_feedback !== 0,
    status: row.status,
    createdAt: isoTime(row.created_at),
  };
}

type FieldRow = { key: string; value: string; type: string };
type ItemRow = { product_variant_id: string; quantity: number; price_cents: number; coupon_id: string | null };
type LogRow = { log: string; type: string; created_at: number };

/** An invoice as the list shows it, from its source row and its children (each in their order). */
export function toInvoice(row: InvoiceRow, fields: readonly FieldRow[], items: readonly ItemRow[], logs: readonly LogRow[]): Invoice {
  return {
    ...toCustomerInvoice(row),
    customerId: row.customer_id,
    discordAccount: row.discord_id === null ? null : { discordId: row.discord_id, email: row.discord_email ?? "" },
    invoiceFields: fields.map((f) => ({ key: f.key, value: f.value, type: f.type })),
    invoiceItems: items.map((i) => ({ productVariantId: i.product_variant_id, quantity: i.quantity, price: centsToUsd(i.price_cents), couponId: i.coupon_id })),
    invoiceLogs: logs.map((l) => ({ log: l.log, type: l.type, createdAt: isoTime(l.created_at) })),
  };
}

/** Invoices as the list shows them, from their source rows: one query each for fields, items and logs. */
export async function assembleInvoices(db: Kysely<Database>, rows: InvoiceRow[]): Promise<Invoice[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const [fields, items, logs] = await Promise.all([
    db.selectFrom("invoice_fields").select(["invoice_id", "key", "value", "type"]).where(oneOf(db, "invoice_id", ids)).orderBy("invoice_id").orderBy("position").execute(),
    db
      .selectFrom("invoice_items")
      .select(["invoice_id", "product_variant_id", "quantity", "price_cents", "coupon_id"])
      .where(oneOf(db, "invoice_id", ids))
      .orderBy("invoice_id")
      .orderBy("position")
      .execute(),
    db.selectFrom("invoice_logs").select(["invoice_id", "log", "type", "created_at"]).where(oneOf(db, "invoice_id", ids)).orderBy("invoice_id").orderBy("id").execute(),
  ]);
  const fieldsBy = groupBy(fields, (f) => f.invoice_id);
  const itemsBy = groupBy(items, (i) => i.invoice_id);
  const logsBy = groupBy(logs, (l) => l.invoice_id);
  return rows.map((row) => toInvoice(row, fieldsBy.get(row.id) ?? [], itemsBy.get(row.id) ?? [], logsBy.get(row.id) ?? []));
}

export interface InvoicesRepository {
  /** A page as JSON texts of its elements, in order, ready to send. */
  listPage(storeId: string, q: ListQuery): Promise<Page>;
  /** The page as objects (the command line, tests). */
  list(storeId: string, q: ListQuery): Promise<{ invoices: Invoice[]; next: Cursor | null }>;
  /** One invoice of this store as the list shows it, or null (also when it belongs to another store). */
  findView(storeId: string, invoiceId: string): Promise<Invoice | null>;
}

export function createInvoicesRepository(source: PageSource): InvoicesRepository {
  const db = source.kysely;
  /** Missing documents, assembled from the source tables. */
  async function assembleByIds(ids: string[]): Promise<Map<string, string>> {
    const rows = await db.selectFrom("invoices").select(INVOICE_COLUMNS).where(oneOf(db, "id", ids)).execute();
    const views = await assembleInvoices(db, rows);
    return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
  }

  /**
   * The page's keys, ordered, limit + 1 of them: unfiltered, the documents' own range (documentsInPageOrder);
   * otherwise from the page index alone (with `status`, one ordered range
   * of (store, status, created_at, id) per status, each cut at the page size, merged: at most statuses ×
   * (limit + 1) index entries whatever the store's size); with `id`, see idFilterPage.
   */
  function pageKeys(storeId: string, q: ListQuery): PageKeys {
    if (q.id !== null) return idFilterPage(storeId, q, q.id);
    if (q.statuses === null) return documentsInPageOrder(db, "invoice_views", storeId, q);
    const pageIdsOf = (status: string) => {
      let ids = db.selectFrom("invoices as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId).where("p.status", "=", status);
      for (const cond of windowConditions("p", q)) ids = ids.where(cond);
      return ids.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(pageFetch(q.limit));
    };
    return { ranges: q.statuses.map(pageIdsOf), distinct: false };
  }
  const pageOf = pageShapes("invoice_page", (storeId, q) => pageQuery(source, pageKeys(storeId, q), "invoice_views", q.limit));

  function listPage(storeId: string, q: ListQuery): Promise<Page> {
    return readPage(source, pageOf(storeId, q), q.limit, "invoice_views", assembleByIds);
  }

  /**
   * `id`: the invoices whose id, customer, session or chat account is the value (a few rows, found by their
   * indexes and ordered), and those with an item of that variant or coupon (possibly very many: each is a
   * walk of an index in page order, (store, variant, invoice created_at, invoice id), cut at the page size).
   * Merged in page order: a page costs about the same at any size of store or popularity of the value.
   */
  function idFilterPage(storeId: string, q: ListQuery, id: string): PageKeys {
    const statuses = q.statuses;
    let few = db
      .selectFrom("invoices as p")
      .select(["p.id", "p.created_at"])
      // Found by their ids, never by a walk of the store, with or without statistics (storeCondition).
      .where(storeCondition(source.dialect, "p.store_id", storeId))
      // Each branch is one index lookup; the union is a small candidate set.
      .where("p.id", "in", (eb) =>
        eb
          .selectFrom("invoices as i1")
          .select("i1.id")
          .where("i1.store_id", "=", storeId)
          .where("i1.id", "=", id)
          .unionAll(eb.selectFrom("invoices as i2").select("i2.id").where("i2.customer_id", "=", id))
          .unionAll(eb.selectFrom("invoices as i3").select("i3.id").where("i3.store_id", "=", storeId).where("i3.created_on_session_id", "=", id))
          .unionAll(eb.selectFrom("invoices as i4").select("i4.id").where("i4.store_id", "=", storeId).where("i4.discord_id", "=", id)),
      );
    if (statuses !== null) few = few.where("p.status", "in", statuses);
    for (const cond of windowConditions("p", q)) few = few.where(cond);
    few = few.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(pageFetch(q.limit));
    const byItem = (column: "product_variant_id" | "coupon_id") => {
      let walk = db
        .selectFrom("invoice_items as t")
        .select(["t.invoice_id as id", "t.invoice_created_at as created_at"])
        .distinct()
        .where("t.store_id", "=", storeId)
        .where(`t.${column}`, "=", id);
      if (statuses !== null) walk = walk.where(({ exists, selectFrom }) => exists(selectFrom("invoices as s").select("s.id").whereRef("s.id", "=", "t.invoice_id").where("s.status", "in", statuses)));
      for (const cond of windowConditions("t", q, { createdAt: "invoice_created_at", id: "invoice_id" })) walk = walk.where(cond);
      return walk.orderBy("t.invoice_created_at", "desc").orderBy("t.invoice_id", "desc").limit(pageFetch(q.limit));
    };
    return { ranges: [few, byItem("product_variant_id"), byItem("coupon_id")], distinct: true };
  }

  return {
    listPage,

    async list(storeId, q) {
      const page = await listPage(storeId, q);
      return { invoices: pageElements<Invoice>(page), next: page.next };
    },

    findView: (storeId, invoiceId) => findInvoiceView(db, storeId, invoiceId),
  };
}

/** One invoice of this store as the list shows it (its stored document, else assembled), or null. */
export async function findInvoiceView(db: Kysely<Database>, storeId: string, invoiceId: string): Promise<Invoice | null> {
  const stored = await db
    .selectFrom("invoice_views as v")
    .select("v.body")
    .where("v.id", "=", invoiceId)
    .where("v.store_id", "=", storeId)
    // A document marked stale by a write the projector has not caught up with is assembled instead.
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom("stale_invoice_views as s").select("s.pos").whereRef("s.doc_id", "=", "v.id"))))
    .executeTakeFirst();
  if (stored?.body != null) return JSON.parse(stored.body) as Invoice;
  const row = await db.selectFrom("invoices").select(INVOICE_COLUMNS).where("store_id", "=", storeId).where("id", "=", invoiceId).executeTakeFirst();
  if (!row) return null;
  const [view] = await assembleInvoices(db, [row]);
  return view ?? null;
}
