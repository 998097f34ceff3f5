// Reads customers as the API shows them. A page costs four queries whatever its size: the customers with
// their chat account (page ids first, then their rows), then their reviews, sessions and invoices. The order figures (totalOrders,
// totalSpent, first/last order date) are computed from the invoices just read, so they are never stale.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { type Cursor, type ListQuery, isoTime } from "../lib/list-query.ts";
import { centsToUsd } from "../lib/money.ts";
import { groupBy, takePage, windowConditions } from "../lib/paging.ts";
import { toCustomerInvoice } from "../invoices/invoices.repository.ts";
import type { Customer } from "./customers.schemas.ts";

export interface CustomersRepository {
  list(storeId: string, q: ListQuery): Promise<{ customers: Customer[]; next: Cursor | null }>;
}

export function createCustomersRepository(db: Kysely<Database>): CustomersRepository {
  return {
    async list(storeId, q) {
      // The page's ids first, from the page index alone (or, with `id`, from covering indexes over the
      // candidates), then the rows and chat accounts of those ids only.
      let pageIds = db.selectFrom("customers as p").select(["p.id", "p.created_at"]).where("p.store_id", "=", storeId);
      if (q.id !== null) {
        const id = q.id;
        pageIds = pageIds.where("p.id", "in", (eb) =>
          eb
            .selectFrom("customers as c1")
            .select("c1.id")
            .where("c1.id", "=", id)
            .unionAll(eb.selectFrom("customer_discord_accounts as d1").select("d1.customer_id as id").where("d1.store_id", "=", storeId).where("d1.discord_id", "=", id))
            .unionAll(eb.selectFrom("invoices as i1").select("i1.customer_id as id").where("i1.id", "=", id))
            .unionAll(eb.selectFrom("reviews as r1").select("r1.customer_id as id").where("r1.store_id", "=", storeId).where("r1.product_id", "=", id))
            .unionAll(eb.selectFrom("invoice_items as t1").select("t1.customer_id as id").where("t1.store_id", "=", storeId).where("t1.product_variant_id", "=", id))
            .unionAll(eb.selectFrom("invoice_items as t2").select("t2.customer_id as id").where("t2.store_id", "=", storeId).where("t2.coupon_id", "=", id)),
        );
      }
      for (const cond of windowConditions("p", q)) pageIds = pageIds.where(cond);
      pageIds = pageIds.orderBy("p.created_at", "desc").orderBy("p.id", "desc").limit(q.limit + 1);
      const rows = await db
        .selectFrom(pageIds.as("pg"))
        .innerJoin("customers as c", "c.id", "pg.id")
        .leftJoin("customer_discord_accounts as d", "d.customer_id", "c.id")
        .select(["c.id", "c.email", "c.created_at", "d.discord_id", "d.email as discord_email"])
        .orderBy("c.created_at", "desc")
        .orderBy("c.id", "desc")
        .execute();
      const { page, next } = takePage(rows, q.limit);
      if (page.length === 0) return { customers: [], next };

      const ids = page.map((r) => r.id);
      const [reviews, sessions, invoices] = await Promise.all([
        db
          .selectFrom("reviews")
          .select(["id", "customer_id", "rating", "text", "product_id", "created_at"])
          .where("customer_id", "in", ids)
          .orderBy("customer_id")
          .orderBy("created_at", "desc")
          .orderBy("id", "desc")
          .execute(),
        db
          .selectFrom("customer_sessions")
          .select(["customer_id", "ip", "user_agent", "country", "last_used_at", "created_at", "id"])
          .where("customer_id", "in", ids)
          .orderBy("customer_id")
          .orderBy("created_at", "desc")
          .orderBy("id", "desc")
          .execute(),
        db.selectFrom("invoices").selectAll().where("customer_id", "in", ids).orderBy("customer_id").orderBy("created_at", "desc").orderBy("id", "desc").execute(),
      ]);
      const reviewsBy = groupBy(reviews, (r) => r.customer_id);
      const sessionsBy = groupBy(sessions, (s) => s.customer_id);
      const invoicesBy = groupBy(invoices, (i) => i.customer_id);

      const customers = page.map((row): Customer => {
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
          totalOrders,
          lastOrderDate: last === null ? null : isoTime(last),
          firstOrderDate: first === null ? null : isoTime(first),
          totalSpent: centsToUsd(spentCents),
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
      return { customers, next };
    },
  };
}
