// Which writes make which documents stale: the read model's one list. A write to a row of a source table
// makes stale the documents named by the row's columns below; the database's triggers (installed by
// migration 0017, on PostgreSQL replaced by 0025's statement triggers; each keeps its own frozen copy) mark
// exactly these, in the write's transaction, and test/readmodel/staleness.test.ts checks the installed
// triggers against this list.
export type Views = "customer_views" | "invoice_views";

/** Source table → the documents a row of it belongs to: [documents table, the row's column naming one]. */
export const STALENESS_RULES: Readonly<Record<string, readonly (readonly [Views, string])[]>> = {
  customers: [["customer_views", "id"]],
  customer_discord_accounts: [["customer_views", "customer_id"]],
  reviews: [["customer_views", "customer_id"]],
  customer_sessions: [["customer_views", "customer_id"]],
  // A customer's document lists its invoices and derives its order figures from them.
  invoices: [
    ["invoice_views", "id"],
    ["customer_views", "customer_id"],
  ],
  invoice_items: [["invoice_views", "invoice_id"]],
  invoice_fields: [["invoice_views", "invoice_id"]],
  invoice_logs: [["invoice_views", "invoice_id"]],
};

/** The tables that own a documents row each, kept in page order (their store and creation time). */
export const DOCUMENT_OWNERS: Readonly<Record<Views, string>> = { customer_views: "customers", invoice_views: "invoices" };

/** The marks table of each documents table: the ids of its documents that a write made stale. */
export const STALE_OF = { customer_views: "stale_customer_views", invoice_views: "stale_invoice_views" } as const satisfies Record<Views, string>;
