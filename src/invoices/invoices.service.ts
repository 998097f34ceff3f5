// Checkout: creates a pending invoice whose total is the sum of price × quantity, with its items, custom
// fields, a first log line and its invoice.created event, in one transaction.
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { appendEvent } from "../events/events.repository.ts";
import { newId, newTimedId } from "../lib/ids.ts";
import { usdToCents } from "../lib/money.ts";
import type { CheckoutBody, Invoice } from "../schemas/invoices.schemas.ts";
import { type InvoicesRepository, toInvoice } from "../readmodel/invoice-documents.ts";
import { createStoresRepository } from "../stores/stores.repository.ts";
import { createInvoiceSourceRepository, insertInvoice, insertSession, isCustomerSession, readInvoiceSnapshot } from "./invoices.repository.ts";

export interface InvoicesService {
  checkout(storeId: string, input: CheckoutBody): Promise<Invoice>;
}

/** The checkout's items in cents, with their position, and the total; refused when a price or the total cannot be. */
function pricedItems(input: CheckoutBody) {
  const items = input.items.map((item, position) => {
    const priceCents = usdToCents(item.price);
    if (priceCents === null) {
      throw new AppError("invalid_request", "price must have at most two decimals", { param: `items[${position}].price` });
    }
    return { ...item, position, priceCents };
  });
  const totalCents = items.reduce((sum, i) => sum + i.priceCents * i.quantity, 0);
  if (!Number.isSafeInteger(totalCents)) throw new AppError("invalid_request", "total is too large", { param: "items" });
  return { items, totalCents };
}

/** The session the invoice names: the customer's own one given, else one recorded for this checkout. */
async function checkoutSession(tx: Transaction<Database>, storeId: string, input: CheckoutBody, createdAt: number): Promise<string> {
  if (input.sessionId !== undefined) {
    if (!(await isCustomerSession(tx, input.sessionId, input.customerId))) throw new AppError("invalid_request", `No session ${input.sessionId} of this customer`, { param: "sessionId" });
    return input.sessionId;
  }
  // Every invoice names the session it was created on; a checkout without one records its own.
  const sessionId = newId("ses");
  const s = input.session ?? { ip: "", userAgent: "storefront-admin-api", country: "" };
  await insertSession(tx, { id: sessionId, store_id: storeId, customer_id: input.customerId, ip: s.ip, user_agent: s.userAgent, country: s.country, last_used_at: createdAt, created_at: createdAt });
  return sessionId;
}

/** The invoice.created event, showing the invoice as the list will; its document is built after the commit (the projector). */
async function appendCreatedEvent(tx: Transaction<Database>, storeId: string, id: string, createdAt: number): Promise<Invoice> {
  const snapshot = await readInvoiceSnapshot(tx, storeId, id);
  if (snapshot === null) throw new Error(`invoice ${id} is missing inside its own transaction`);
  const invoice = toInvoice(snapshot.row, snapshot.fields, snapshot.items, snapshot.logs);
  await appendEvent(tx, { storeId, type: "invoice.created", data: { invoice }, createdAt });
  return invoice;
}

export function createInvoicesService(db: Kysely<Database>, invoices: InvoicesRepository, now: () => number = Date.now): InvoicesService {
  const stores = createStoresRepository(db);
  const rows = createInvoiceSourceRepository(db);

  /** The store's customer, refused when the store or the customer is not there. */
  async function requireCustomer(storeId: string, customerId: string) {
    if (!(await stores.storeExists(storeId))) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
    const customer = await rows.findCustomer(storeId, customerId);
    if (!customer) throw new AppError("customer_not_found", `No customer ${customerId} in this store`, { param: "customerId" });
    return customer;
  }

  return {
    async checkout(storeId, input) {
      const customer = await requireCustomer(storeId, input.customerId);
      const { items, totalCents } = pricedItems(input);
      const createdAt = now();
      // Sorted by time: an invoice is paid soon after its checkout, so the payments' entries keyed by invoice
      // (log lines, deliveries, events) land in the recent end of their indexes (src/lib/ids.ts, newTimedId).
      const id = newTimedId("inv", createdAt);
      return db.transaction().execute(async (tx) => {
        const sessionId = await checkoutSession(tx, storeId, input, createdAt);
        await insertInvoice(tx, {
          invoice: {
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
          },
          items: items.map((i) => ({
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
          fields: (input.fields ?? []).map((f, position) => ({ invoice_id: id, position, key: f.key, value: f.value, type: f.type })),
          firstLog: { invoice_id: id, log: "Invoice created (pending)", type: "info", created_at: createdAt },
        });
        return appendCreatedEvent(tx, storeId, id, createdAt);
      });
    },
  };
}
