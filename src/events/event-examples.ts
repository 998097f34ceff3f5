// One example of each event type, as an endpoint receives it: the OpenAPI document's `webhooks` show them,
// and `storefront endpoints test` sends them (with a fresh id and time). One invoice goes through its life
// (checkout, payment, dispute; or expiry, cancellation, refund), each event carrying the invoice as the
// list operation shows it at that moment, with the log line of that change. test/platform/ops/openapi.webhooks.test.ts
// checks each against its schema.
import type { Invoice, InvoiceStatus } from "../schemas/invoices.schemas.ts";
import { type EventBody, type EventType, EVENT_TYPES } from "./events.types.ts";

const CREATED_AT = "2026-11-17T11:53:13.272Z";

const pendingInvoice: Invoice = {
  id: "inv_gfkb1nrgnd7d8hwv9shy",
  totalInUsd: 457.64,
  paymentMethod: "stripe",
  displayedPaymentInfo: "American Express •••• 8428",
  createdOnSessionId: "ses_3c9t569mjgwvhx5c2kr4",
  leftFeedback: false,
  status: "pending",
  createdAt: CREATED_AT,
  customerId: "cus_jfedb73s1t8vbe8ft7kn",
  discordAccount: { discordId: "628034225008455397", email: "deonz196@gmail.com" },
  invoiceFields: [{ key: "Number of seats", value: "8", type: "number" }],
  invoiceItems: [
    { productVariantId: "var_9d8hrm6p3y67v0xacbtp", quantity: 1, price: 100.49, couponId: null },
    { productVariantId: "var_s9zhqykz0bsd4d89dj0x", quantity: 1, price: 357.15, couponId: null },
  ],
  invoiceLogs: [{ log: "Invoice created (pending)", type: "info", createdAt: CREATED_AT }],
};

const DELIVERY = "dlv_3js0daqx9bm8vdyad4cs";

/** Each invoice event: the status it enters, the status before, when, and the line the change logs. */
const CHANGES: Record<Exclude<(typeof EVENT_TYPES)[number], "delivery.failed" | "invoice.created">, { status: InvoiceStatus; from: InvoiceStatus; at: string; log: string; type: string }> = {
  "invoice.completed": { status: "completed", from: "pending", at: "2026-11-17T11:57:22.660Z", log: `Payment confirmed by plugin stripe v3 (delivery ${DELIVERY}): pending -> completed`, type: "info" },
  "invoice.disputed": { status: "disputed", from: "completed", at: "2026-11-24T09:12:05.118Z", log: "Dispute opened, reported by plugin stripe v3 (delivery dlv_8m2k4q7r9t1v3x5z7b9d): completed -> disputed", type: "warning" },
  "invoice.expired": { status: "expired", from: "pending", at: "2026-11-17T12:53:41.007Z", log: "Payment window elapsed (60 min without payment): pending -> expired", type: "info" },
  "invoice.cancelled": { status: "cancelled", from: "pending", at: "2026-11-17T12:05:09.431Z", log: "Cancelled by the merchant (admin API): Customer asked to cancel: pending -> cancelled", type: "info" },
  "invoice.refunded": { status: "refunded", from: "completed", at: "2026-11-19T16:40:55.902Z", log: "Refunded by the merchant (admin API): Refunded in the Stripe dashboard: completed -> refunded", type: "warning" },
};

/** The invoice as the list shows it after `type`'s change (a refund or dispute follows the payment). */
function invoiceAfter(type: keyof typeof CHANGES): Invoice {
  const change = CHANGES[type];
  const paid = change.from === "completed" ? invoiceAfter("invoice.completed") : pendingInvoice;
  return { ...paid, status: change.status, invoiceLogs: [...paid.invoiceLogs, { log: change.log, type: change.type, createdAt: change.at }] };
}

const IDS: Record<EventType, string> = {
  "invoice.created": "evt_0m3q7a9k2x4c6v8b1n5z",
  "invoice.completed": "evt_1p4r8b0m3y5d7w9c2q6a",
  "invoice.disputed": "evt_2q5s9c1n4z6f8x0d3r7b",
  "invoice.expired": "evt_3r6t0d2p5a7g9y1f4s8c",
  "invoice.cancelled": "evt_4s7v1f3q6b8h0z2g5t9d",
  "invoice.refunded": "evt_5t8w2g4r7c9j1a3h6v0f",
  "delivery.failed": "evt_6v9x3h5s8d0k2b4j7w1g",
};

/** An example of an event of `type`, exactly as the feed shows it and an endpoint receives it. */
export function exampleEvent(type: EventType): EventBody {
  if (type === "delivery.failed") {
    return {
      id: IDS[type],
      type,
      createdAt: "2026-11-17T11:55:02.384Z",
      data: {
        delivery: {
          id: "dlv_7w0y4j6t9f1m3c5k8x2h",
          pluginName: "stripe",
          outcome: "plugin_error",
          status: 500,
          error: { kind: "script_error", message: "[string \"stripe\"]:142: attempt to index a nil value (field 'object')", line: 142 },
        },
      },
    };
  }
  if (type === "invoice.created") return { id: IDS[type], type, createdAt: CREATED_AT, data: { invoice: pendingInvoice } };
  return { id: IDS[type], type, createdAt: CHANGES[type].at, data: { invoice: invoiceAfter(type) } };
}

/** Every type's example, in the order of EVENT_TYPES. */
export function exampleEvents(): EventBody[] {
  return EVENT_TYPES.map(exampleEvent);
}
