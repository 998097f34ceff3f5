// Reads customers as the API shows them. A page's ids come from the page index (or, with filters, from
// their indexes), its documents from the read model's stored JSON of those ids (src/readmodel/documents.ts). A customer
// whose document is missing (a write that did not refresh it) is assembled from the source tables: its
// chat account, reviews, sessions and invoices, whose completed ones give the order figures.
import { sql, type Expression, type Kysely, type SqlBool } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { type Cursor, type ListQuery, isoTime } from "../lib/list-query.ts";
import { centsToUsd } from "../lib/money.ts";
import { pageShapes } from "./page-shapes.ts";
import { type Page, type PageSource, documentsInPageOrder, groupBy, oneOf, type PageKeys, pageElements, pageFetch, pageQuery, readPage, storeCondition, windowConditions } from "./paging.ts";
import { INVOICE_COLUMNS, toCustomerInvoice } from "./invoice-documents.ts";
import type { Customer } from "../schemas/customers.schemas.ts";

export interface CustomerRow {
  id: string;
  email: string;
  created_at: number;
  discord_id: string | null;
  discord_email: string | null;
}

/** The customer rows (with their chat account) of these ids, in no particular order. */
export async function customerRows(db: Kysely<Database>, ids: string[]): Promise<CustomerRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom("customers as c")
    .leftJoin("customer_discord_accounts as d", "d.customer_id", "c.id")
    .select(["c.id", "c.email", "c.created_at", "d.discord_id", "d.email as discord_email"])
    .where(oneOf(db, "c.id", ids))
    .execute();
}

/** A customer's completed invoices, which the order figures derive from (times in epoch ms, null when none). */
export interface CompletedOrders {
  orders: number;
  spentCents: number;
  first: number | null;
  last: number | null;
}

/** The order figures of a customer document, in their order there (between its id and its e-mail). */
export function orderFigures(c: CompletedOrders): Pick<Customer, "totalOrders" | "lastOrderDate" | "firstOrderDate" | "totalSpent"> {
  return {
    totalOrders: c.orders,
    lastOrderDate: c.last === null ? null : isoTime(c.last),
    firstOrderDate: c.first === null ? null : isoTime(c.first),
    totalSpent: centsToUsd(c.spentCents),
  };
}

/** Customers as the list shows them, from their source rows: one query each for reviews, sessions, invoices. */
export async function assembleCustomers(db: Kysely<Database>, rows: CustomerRow[]): Promise<Customer[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const [reviews, sessions, invoices] = await Promise.all([
    db
      .selectFrom("reviews")
      .select(["id", "customer_id", "rating", "text", "product_id", "created_at"])
      .where(oneOf(db, "customer_id", ids))
      .orderBy("customer_id")
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute(),
    db
      .selectFrom("customer_sessions")
      .select(["customer_id", "ip", "user_agent", "country", "last_used_at", "created_at", "id"])
      .where(oneOf(db, "customer_id", ids))
      .orderBy("customer_id")
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute(),
    db.selectFrom("invoices").select(INVOICE_COLUMNS).where(oneOf(db, "customer_id", ids)).orderBy("customer_id").orderBy("created_at", "desc").orderBy("id", "desc").execute(),
  ]);
  const reviewsBy = groupBy(reviews, (r) => r.customer_id);
  const sessionsBy = groupBy(sessions, (s) => s.customer_id);
  const invoicesBy = groupBy(invoices, (i) => i.customer_id);

  return rows.map((row): Customer => {
    const own = invoicesBy.get(row.id) ?? [];
    let totalOrders = 0;
    let spentCents = 0;
    let first: number | null = null;
    let last: number | null = null;
    for (const inv of own) {
      if (inv.status !== "completed") continue;
      totalOrders++;
      spentCents += inv.total_cents;
      if (first === null || inv.created_at < first) first = inv.created_at;
      if (last === null || inv.created_at > last) last = inv.created_at;
    }
    return {
      id: row.id,
      ...orderFigures({ orders: totalOrders, spentCents, first, last }),
      email: row.email,
      createdAt: isoTime(row.created_at),
      storeCustomerDiscordAccount: row.discord_id === null ? null : { discordId: row.discord_id, email: row.discord_email ?? "" },
      reviews: (reviewsBy.get(row.id) ?? []).map((r) => ({
        id: r.id,
        rating: r.rating,
        text: r.text,
        productId: r.product_id,
        createdAt: isoTime(r.created_at),
      })),
      customerSessions: (sessionsBy.get(row.id) ?? []).map((s) => ({
        ip: s.ip,
        userAgent: s.user_agent,
        country: s.country,
        lastUsedAt: isoTime(s.last_used_at),
        createdAt: isoTime(s.created_at),
      })),
      invoices: own.map(toCustomerInvoice),
    };
  });
}

export interface CustomersRepository {
  /** A page as JSON texts of its elements, in order, ready to send. */
  listPage(storeId: string, q: ListQuery): Promise<Page>;
  /** The page as objects (the command line, tests). */
  list(storeId: string, q: ListQuery): Promise<{ customers: Customer[]; next: Cursor | null }>;
}

export function createCustomersRepository(source: PageSource): CustomersRepository {
  const { kysely: db, dialect } = source;
  // The expression of the customers_email index (migration 0009): ASCII folding on both dialects.
  const foldedEmail = dialect === "postgres" ? sql`lower(p.email collate "C")` : sql`lower(p.email)`;

  async function assembleByIds(ids: string[]): Promise<Map<string, string>> {
    const views = await assembleCustomers(db, await customerRows(db, ids));
    return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
  }

  /**
   * The e-mail and status filters on the customer named by `customerId`: a column of the customer row `p`
   * itself, or of a child row (`t.customer_id`), where the e-mail is then probed in the customer's row so
   * that the walk keeps its index order.
   */
  function customerFilters(q: ListQuery, customerId: "p.id" | "t.customer_id"): Expression<SqlBool>[] {
    const conds: Expression<SqlBool>[] = [];
    const ref = sql.ref(customerId);
    if (q.email !== null) {
      conds.push(
        customerId === "p.id"
          ? sql<SqlBool>`${foldedEmail} = ${q.email}`
          : sql<SqlBool>`exists (select 1 from customers p where p.id = ${ref} and ${foldedEmail} = ${q.email})`,
      );
    }
    // For each customer walked, one probe of (customer_id, status): a page costs its size divided by the
    // share of customers who have such an invoice, in index seeks.
    if (q.statuses !== null) conds.push(sql<SqlBool>`exists (select 1 from invoices s where s.customer_id = ${ref} and s.status in (${sql.join(q.statuses)}))`);
    return conds;
  }

  /**
   * The page's keys, ordered, limit + 1 of them: unfiltered, the documents' own range (documentsInPageOrder);
   * otherwise from the page index alone (with `email`, from the e-mail index; with `id`, see idFilterPage).
   */
  function pageKeys(storeId: string, q: ListQuery): PageKeys {
    if (q.id !== null) return idFilterPage(storeId, q, q.id);
    if (q.email === null && q.statuses === null) return documentsInPageOrder(db, "customer_views", storeId, q);
    let pageIds = db.selectFrom("customers as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId);
    for (const cond of [...customerFilters(q, "p.id"), ...windowConditions("p", q)]) pageIds = pageIds.where(cond);
    return pageIds.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(pageFetch(q.limit));
  }
  const pageOf = pageShapes("customer_page", (storeId, q) => pageQuery(source, pageKeys(storeId, q), "customer_views", q.limit));

  function listPage(storeId: string, q: ListQuery): Promise<Page> {
    return readPage(source, pageOf(storeId, q), q.limit, "customer_views", assembleByIds);
  }

  /**
   * `id`: the customer with that id, chat account or invoice (a few rows, found by their indexes), and those
   * with a review of that product or an item of that variant or coupon (possibly very many: each is a walk
   * of an index in customer page order, (store, value, customer created_at, customer id), cut at the page
   * size). Merged in page order: a page costs about the same at any size of store or popularity of the value.
   */
  function idFilterPage(storeId: string, q: ListQuery, id: string): PageKeys {
    let few = db
      .selectFrom("customers as p")
      .select(["p.id", "p.created_at"])
      // Found by their ids, never by a walk of the store, with or without statistics (storeCondition).
      .where(storeCondition(dialect, "p.store_id", storeId))
      .where("p.id", "in", (eb) =>
        eb
          .selectFrom("customers as c1")
          .select("c1.id")
          .where("c1.id", "=", id)
          .unionAll(eb.selectFrom("customer_discord_accounts as d1").select("d1.customer_id as id").where("d1.store_id", "=", storeId).where("d1.discord_id", "=", id))
          .unionAll(eb.selectFrom("invoices as i1").select("i1.customer_id as id").where("i1.id", "=", id)),
      );
    for (const cond of [...customerFilters(q, "p.id"), ...windowConditions("p", q)]) few = few.where(cond);
    few = few.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(pageFetch(q.limit));

    const walk = (table: "reviews" | "invoice_items", column: "product_id" | "product_variant_id" | "coupon_id") => {
      let w = db
        // Both tables have store_id, customer_id and customer_created_at; the value's column is named raw.
        .selectFrom(`${table} as t` as "invoice_items as t")
        .select(["t.customer_id as id", "t.customer_created_at as created_at"])
        .distinct()
        .where("t.store_id", "=", storeId)
        .where(sql.ref(`t.${column}`), "=", id);
      for (const cond of [...customerFilters(q, "t.customer_id"), ...windowConditions("t", q, { createdAt: "customer_created_at", id: "customer_id" })]) w = w.where(cond);
      return w.orderBy("t.customer_created_at", "desc").orderBy("t.customer_id", "desc").limit(pageFetch(q.limit));
    };
    return { ranges: [few, walk("reviews", "product_id"), walk("invoice_items", "product_variant_id"), walk("invoice_items", "coupon_id")], distinct: true };
  }

  return {
    listPage,
    async list(storeId, q) {
      const page = await listPage(storeId, q);
      return { customers: pageElements<Customer>(page), next: page.next };
    },
  };
}
