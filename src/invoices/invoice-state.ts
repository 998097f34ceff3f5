// The invoice state machine (docs/plugins.md, "The result"; docs/operations.md, "Invoices that live like real ones"), in one place: what each action does to an invoice in
// each status. Plugin actions (pushInvoice, disputeInvoice), the payment window's expiry, and the
// merchant's cancel and refund all ask this table; invoice-transitions.ts applies the answer.
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";

export type PluginAction = "pushInvoice" | "disputeInvoice";
/** Every way an invoice's status can change: a plugin's result, the payment window, the merchant. */
export type InvoiceAction = PluginAction | "expire" | "cancel" | "refund";

export type TransitionDecision =
  | { kind: "change"; to: InvoiceStatus }
  /** The action is already in effect: nothing is written. */
  | { kind: "already" }
  | { kind: "invalid" };

const change = (to: InvoiceStatus): TransitionDecision => ({ kind: "change", to });
const ALREADY: TransitionDecision = { kind: "already" };
const INVALID: TransitionDecision = { kind: "invalid" };

/** Rows: current status; columns: action. Anything not listed is invalid. */
const TABLE: Record<InvoiceStatus, Partial<Record<InvoiceAction, TransitionDecision>>> = {
  pending: { pushInvoice: change("completed"), expire: change("expired"), cancel: change("cancelled") },
  // A late payment still completes an expired invoice: the money arrived.
  expired: { pushInvoice: change("completed"), expire: ALREADY },
  completed: { pushInvoice: ALREADY, disputeInvoice: change("disputed"), refund: change("refunded") },
  // A won dispute: the provider confirms the payment again. A lost one ends refunded.
  disputed: { pushInvoice: change("completed"), disputeInvoice: ALREADY, refund: change("refunded") },
  refunded: { refund: ALREADY },
  cancelled: { cancel: ALREADY },
};

export function decideTransition(current: InvoiceStatus, action: InvoiceAction): TransitionDecision {
  return TABLE[current][action] ?? INVALID;
}

export function isInvoiceStatus(value: string): value is InvoiceStatus {
  return ["pending", "completed", "disputed", "refunded", "expired", "cancelled"].includes(value);
}
