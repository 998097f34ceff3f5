// The invoice statuses (docs/operations.md, "Invoices that live like real ones"), on their own so that the query parser and the schemas share them
// without importing each other.
export const INVOICE_STATUSES = ["pending", "completed", "disputed", "refunded", "expired", "cancelled"] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];
