// The event of an invoice entering a status, written in the transaction that changed it. Every
// transition (checkout, plugin actions, expiry, cancel, refund) calls this from its own transaction.
import type { Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { findInvoiceView } from "../invoices/invoices.repository.ts";
import type { Invoice, InvoiceStatus } from "../invoices/invoices.schemas.ts";
import { appendEvent } from "./events.repository.ts";
import { invoiceEventType } from "./events.types.ts";

/** Appends `invoice.<status>` with the invoice as the list shows it inside `tx`; returns that view. */
export async function appendInvoiceEvent(tx: Transaction<Database>, storeId: string, invoiceId: string, status: InvoiceStatus, at: number): Promise<Invoice> {
  // A repository over the transaction sees the transaction's own writes (the new status and log lines).
  const invoice = await findInvoiceView(tx, storeId, invoiceId);
  if (invoice === null) throw new Error(`invoice ${invoiceId} of store ${storeId} is missing inside its own transaction`);
  await appendEvent(tx, { storeId, type: invoiceEventType(status), data: { invoice }, createdAt: at });
  return invoice;
}
