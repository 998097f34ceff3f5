// The invoice state machine of CONTRACT §5, in one place: what a plugin's pushInvoice or disputeInvoice
// does to an invoice in each status.
import type { InvoiceStatus } from "./invoices.schemas.ts";

export type PluginAction = "pushInvoice" | "disputeInvoice";

export type TransitionDecision =
  | { kind: "change"; to: InvoiceStatus }
  /** The action is already in effect: answered 200, nothing written. */
  | { kind: "already" }
  | { kind: "invalid" };

export function decideTransition(current: InvoiceStatus, action: PluginAction): TransitionDecision {
  switch (current) {
    case "pending":
    case "expired":
      return action === "pushInvoice" ? { kind: "change", to: "completed" } : { kind: "invalid" };
    case "completed":
      return action === "pushInvoice" ? { kind: "already" } : { kind: "change", to: "disputed" };
    case "disputed":
      // A won dispute: the provider confirms the payment again.
      return action === "pushInvoice" ? { kind: "change", to: "completed" } : { kind: "already" };
    case "refunded":
    case "cancelled":
      return { kind: "invalid" };
  }
}

export function isInvoiceStatus(value: string): value is InvoiceStatus {
  return ["pending", "completed", "disputed", "refunded", "expired", "cancelled"].includes(value);
}
