// Step 4 of a payment: the plugin's decision applied, inside the payment's durable transaction. The event
// is claimed first (its primary key: a concurrent delivery of the same event waits here for this one to
// end, then finds it taken), then the invoice changes through the state machine (invoice-transitions.ts:
// one read, the compare-and-set, the log lines, the event with its fan-out). Only decisions in effect are
// remembered: a 404 or 409 may apply once the merchant fixes things, so its claim is given back.
import type { Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import type { PluginAction } from "../invoices/invoice-state.ts";
import { type TransitionLogLine, type TransitionResult, transitionInTransaction } from "../invoices/invoice-transitions.ts";
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";

export interface PaymentToApply {
  storeId: string;
  pluginName: string;
  pluginVersion: number;
  deliveryId: string;
  invoiceId: string;
  action: PluginAction;
  /** "id:<eventId>" or "sha256:<body hex>". */
  eventKey: string;
  /** The run's log() lines, appended to the invoice whatever the outcome, when it exists. */
  runLines: TransitionLogLine[];
}

/** What applying did: the invoice's transition, or nothing because the event was applied before. */
export type Applied = TransitionResult | { kind: "duplicate" };

/** The status changed between the read and the compare-and-set: run the whole transaction again. */
export class RetryPayment extends Error {
  constructor() {
    super("the invoice changed during the payment's transaction");
  }
}

/** The invoice's line for the change a plugin made. */
export function paymentLine(p: Pick<PaymentToApply, "action" | "pluginName" | "pluginVersion" | "deliveryId">, from: InvoiceStatus, to: InvoiceStatus): TransitionLogLine {
  const by = `plugin ${p.pluginName} v${p.pluginVersion} (delivery ${p.deliveryId})`;
  return p.action === "pushInvoice" ? { log: `Payment confirmed by ${by}: ${from} -> ${to}`, type: "info" } : { log: `Dispute opened, reported by ${by}: ${from} -> ${to}`, type: "warning" };
}

export async function applyPayment(tx: Transaction<Database>, p: PaymentToApply, now: () => number): Promise<Applied> {
  const claimed = await tx
    .insertInto("applied_events")
    .values({ store_id: p.storeId, plugin_name: p.pluginName, event_key: p.eventKey, delivery_id: p.deliveryId, invoice_id: p.invoiceId, created_at: now() })
    .onConflict((oc) => oc.columns(["store_id", "plugin_name", "event_key"]).doNothing())
    .executeTakeFirst();
  if (Number(claimed.numInsertedOrUpdatedRows ?? 0n) !== 1) return { kind: "duplicate" };
  const result = await transitionInTransaction(tx, { storeId: p.storeId, invoiceId: p.invoiceId, action: p.action, extraLines: p.runLines, describe: (from, to) => paymentLine(p, from, to) }, now);
  if (result === "retry") throw new RetryPayment();
  if (result.kind === "invalid" || result.kind === "not_found") {
    await tx.deleteFrom("applied_events").where("store_id", "=", p.storeId).where("plugin_name", "=", p.pluginName).where("event_key", "=", p.eventKey).execute();
  }
  return result;
}

/** `ignore` changes no status; its log lines still go on the invoice it names, if it is this store's. */
export async function attachRunLines(tx: Transaction<Database>, storeId: string, invoiceId: string, lines: TransitionLogLine[], at: number): Promise<boolean> {
  const own = await tx.selectFrom("invoices").select("id").where("id", "=", invoiceId).where("store_id", "=", storeId).executeTakeFirst();
  if (!own) return false;
  await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: invoiceId, log: l.log, type: l.type, created_at: at }))).execute();
  return true;
}
