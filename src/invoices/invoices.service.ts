// Checkout: creates a pending invoice whose total is the sum of price × quantity, with its items, custom
// fields, a first log line and its invoice.created event, in one transaction.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { appendEvent } from "../events/events.repository.ts";
import { newId } from "../lib/ids.ts";
import { usdToCents } from "../lib/money.ts";
import type { CheckoutBody, Invoice } from "../schemas/invoices.schemas.ts";
import { type InvoicesRepository, readInvoiceSnapshot, toInvoice } from "../readmodel/invoice-documents.ts";

export interface InvoicesService {
  checkout(storeId: string, input: CheckoutBody): Promise<Invoice>;
}

export function createInvoicesService(db: Kysely<Database>, invoices: InvoicesRepository, now: () => number = Date.now): InvoicesService {
  return {
    async checkout(storeId, input) {
      const store = await db.selectFrom("stores").select("id").where("id", "=", storeId).executeTakeFirst();
      if (!store) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
      const customer = await db
        .selectFrom("customers")
        .select(["id", "created_at"])
        .where("id", "=", input.customerId)
        .where("store_id", "=", storeId)
        .executeTakeFirst();
      if (!customer) throw new AppError("customer_not_found", `No customer ${input.customerId} in this store`, { param: "customerId" });

      const items = input.items.map((item, position) => {
        const priceCents = usdToCents(item.price);
        if (priceCents === null) {
          throw new AppError("invalid_request", "price must have at most two decimals", { param: `items[${position}].price` });
        }
        return { ...item, position, priceCents };
      });
      const totalCents = items.reduce((sum, i) => sum + i.priceCents * i.quantity, 0);
      if (!Number.isSafeInteger(totalCents)) throw new AppError("invalid_request", "total is too large", { param: "items" });

      const id = newId("inv");
      const createdAt = now();
      return db.transaction().execute(async (tx) => {
        let sessionId = input.sessionId;
        if (sessionId !== undefined) {
          const own = await tx
            .selectFrom("customer_sessions")
            .select("id")
            .where("id", "=", sessionId)
            .where("customer_id", "=", input.customerId)
            .executeTakeFirst();
          if (!own) throw new AppError("invalid_request", `No session ${sessionId} of this customer`, { param: "sessionId" });
        } else {
          // Every invoice names the session it was created on; a checkout without one records its own.
          sessionId = newId("ses");
          const s = input.session ?? { ip: "", userAgent: "storefront-admin-api", country: "" };
          await tx
            .insertInto("customer_sessions")
            .values({
              id: sessionId,
              store_id: storeId,
              customer_id: input.customerId,
              ip: s.ip,
              user_agent: s.userAgent,
              country: s.country,
              last_used_at: createdAt,
              created_at: createdAt,
            })
            .execute();
        }
        await tx
          .insertInto("invoices")
          .values({
            id,
            store_id: storeId,
            customer_id: input.customerId,
            total_cents: totalCents,
            payment_method: input.paymentMethod,
            displayed_payment_info: input.displayedPaymentInfo ?? "",
            created_on_session_id: sessionId,
            left_feedback: 0,
            status: "pending",
            discord_id: input.discordId ?? null,
            discord_email: input.discordId === undefined ? null : (input.discordEmail ?? ""),
            created_at: createdAt,
            updated_at: createdAt,
          })
          .execute();
        await tx
          .insertInto("invoice_items")
          .values(
            items.map((i) => ({
              invoice_id: id,
              position: i.position,
              store_id: storeId,
              customer_id: input.customerId,
              product_variant_id: i.productVariantId,
              quantity: i.quantity,
              price_cents: i.priceCents,
              coupon_id: i.couponId ?? null,
              invoice_created_at: createdAt,
              customer_created_at: customer.created_at,
            })),
          )
          .execute();
        if (input.fields && input.fields.length > 0) {
          await tx
            .insertInto("invoice_fields")
            .values(input.fields.map((f, position) => ({ invoice_id: id, position, key: f.key, value: f.value, type: f.type })))
            .execute();
        }
        await tx.insertInto("invoice_logs").values({ invoice_id: id, log: "Invoice created (pending)", type: "info", created_at: createdAt }).execute();
        // The event shows the invoice as the list will; its document is built after the commit (the projector).
        const snapshot = await readInvoiceSnapshot(tx, storeId, id);
        if (snapshot === null) throw new Error(`invoice ${id} is missing inside its own transaction`);
        const invoice = toInvoice(snapshot.row, snapshot.fields, snapshot.items, snapshot.logs);
        await appendEvent(tx, { storeId, type: "invoice.created", data: { invoice }, createdAt });
        return invoice;
      });
    },
  };
}
