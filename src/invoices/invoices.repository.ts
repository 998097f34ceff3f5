// Reads invoices as the API shows them. A page costs a fixed number of queries whatever its size:
// one for the invoices, one each for their fields, items and logs.
import type { Kysely, Selectable } from "kysely";
import type { Database, InvoicesTable } from "../db/schema.ts";
import { type Cursor, type ListQuery, isoTime } from "../lib/list-query.ts";
import { centsToUsd } from "../lib/money.ts";
import { groupBy, takePage, windowConditions } from "../lib/paging.ts";
import type { CustomerInvoice, Invoice } from "./invoices.schemas.ts";

export type InvoiceRow = Selectable<InvoicesTable>;

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

export interface InvoicesRepository {
  list(storeId: string, q: ListQuery): Promise<{ invoices: Invoice[]; next: Cursor | null }>;
  /** One invoice of this store as the list shows it, or null (also when it belongs to another store). */
  findView(storeId: string, invoiceId: string): Promise<Invoice | null>;
}

export function createInvoicesRepository(db: Kysely<Database>): InvoicesRepository {
  async function assemble(rows: InvoiceRow[]): Promise<Invoice[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((r) => r.id);
    const [fields, items, logs] = await Promise.all([
      db.selectFrom("invoice_fields").select(["invoice_id", "key", "value", "type"]).where("invoice_id", "in", ids).orderBy("invoice_id").orderBy("position").execute(),
      db
        .selectFrom("invoice_items")
        .select(["invoice_id", "product_variant_id", "quantity", "price_cents", "coupon_id"])
        .where("invoice_id", "in", ids)
        .orderBy("invoice_id")
        .orderBy("position")
        .execute(),
      db.selectFrom("invoice_logs").select(["invoice_id", "log", "type", "created_at"]).where("invoice_id", "in", ids).orderBy("invoice_id").orderBy("id").execute(),
    ]);
    const fieldsBy = groupBy(fields, (f) => f.invoice_id);
    const itemsBy = groupBy(items, (i) => i.invoice_id);
    const logsBy = groupBy(logs, (l) => l.invoice_id);
    return rows.map((row) => ({
      ...toCustomerInvoice(row),
      customerId: row.customer_id,
      discordAccount: row.discord_id === null ? null : { discordId: row.discord_id, email: row.discord_email ?? "" },
      invoiceFields: (fieldsBy.get(row.id) ?? []).map((f) => ({ key: f.key, value: f.value, type: f.type })),
      invoiceItems: (itemsBy.get(row.id) ?? []).map((i) => ({
        productVariantId: i.product_variant_id,
        quantity: i.quantity,
        price: centsToUsd(i.price_cents),
        couponId: i.coupon_id,
      })),
      invoiceLogs: (logsBy.get(row.id) ?? []).map((l) => ({ log: l.log, type: l.type, createdAt: isoTime(l.created_at) })),
    }));
  }

  return {
    async list(storeId, q) {
      // The page's ids first, from the page index alone (or, with `id`, from covering indexes over the
      // candidates), then the rows of those ids only.
      let pageIds = db.selectFrom("invoices as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId);
      if (q.id !== null) {
        const id = q.id;
        // Each branch is one index lookup; the union is the (usually small) candidate set.
        pageIds = pageIds.where("p.id", "in", (eb) =>
          eb
            .selectFrom("invoices as i1")
            .select("i1.id")
            .where("i1.store_id", "=", storeId)
            .where("i1.id", "=", id)
            .unionAll(eb.selectFrom("invoices as i2").select("i2.id").where("i2.customer_id", "=", id))
            .unionAll(eb.selectFrom("invoices as i3").select("i3.id").where("i3.store_id", "=", storeId).where("i3.created_on_session_id", "=", id))
            .unionAll(eb.selectFrom("invoices as i4").select("i4.id").where("i4.store_id", "=", storeId).where("i4.discord_id", "=", id))
            .unionAll(eb.selectFrom("invoice_items as t1").select("t1.invoice_id as id").where("t1.store_id", "=", storeId).where("t1.product_variant_id", "=", id))
            .unionAll(eb.selectFrom("invoice_items as t2").select("t2.invoice_id as id").where("t2.store_id", "=", storeId).where("t2.coupon_id", "=", id)),
        );
      }
      for (const cond of windowConditions("p", q)) pageIds = pageIds.where(cond);
      pageIds = pageIds.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(q.limit + 1);
      const rows = await db
        .selectFrom(pageIds.as("pg"))
        .innerJoin("invoices", "invoices.id", "pg.id")
        .selectAll("invoices")
        .orderBy("invoices.created_at", "desc")
        .orderBy("invoices.id", "desc")
        .execute();
      const { page, next } = takePage(rows, q.limit);
      return { invoices: await assemble(page), next };
    },

    async findView(storeId, invoiceId) {
      const row = await db.selectFrom("invoices").selectAll().where("store_id", "=", storeId).where("id", "=", invoiceId).executeTakeFirst();
      if (!row) return null;
      const [view] = await assemble([row]);
      return view ?? null;
    },
  };
}
