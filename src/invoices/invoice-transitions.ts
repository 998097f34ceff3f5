// Applies a plugin's pushInvoice / disputeInvoice to an invoice: the status change, its log line, the
// run's log lines, the applied event and the delivery record commit together or not at all, durably
// (src/db/durable.ts) before the caller answers. The change is a compare-and-set on the status read, so
// concurrent deliveries (in one process or many on one PostgreSQL) change an invoice at most once; a
// loser re-reads and answers "already applied". Each provider event is applied once: its key is claimed
// first in the same transaction, and a key claimed before makes the delivery a duplicate.
import type { Kysely, Transaction } from "kysely";
import { durableTransaction } from "../db/durable.ts";
import type { Database } from "../db/schema.ts";
import { decideTransition, isInvoiceStatus, type PluginAction } from "./invoice-state.ts";
import type { InvoiceStatus } from "./invoices.schemas.ts";

export interface TransitionLogLine {
  log: string;
  type: string;
}

export type TransitionResult =
  | { kind: "changed"; from: InvoiceStatus; to: InvoiceStatus }
  | { kind: "already"; status: InvoiceStatus }
  | { kind: "invalid"; status: InvoiceStatus }
  | { kind: "not_found" }
  /** The event was applied before (by an earlier delivery): nothing changes. */
  | { kind: "duplicate" };

export interface ApplyInput {
  storeId: string;
  invoiceId: string;
  action: PluginAction;
  /** The transition's own line, given the statuses. */
  describe: (from: InvoiceStatus, to: InvoiceStatus) => TransitionLogLine;
  /** The run's log() lines: appended to the invoice whatever the outcome, when the invoice exists. */
  runLogs: TransitionLogLine[];
  /** The event's key ("id:<eventId>" or "sha256:<body hex>") and the delivery applying it. */
  event: { pluginName: string; key: string; deliveryId: string };
  /** Written in the same transaction (the delivery record), once the outcome is known. */
  record?: (tx: Transaction<Database>, result: TransitionResult) => Promise<void>;
}

const MAX_ATTEMPTS = 5;
const RETRY = new Error("the invoice changed under this transition; retried");

export async function applyPluginAction(db: Kysely<Database>, input: ApplyInput, now: () => number): Promise<TransitionResult> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const outcome = await durableTransaction(db, async (tx): Promise<TransitionResult> => {
      const t = now();
      // Claim the event first: a concurrent delivery of the same event waits here for this one to end.
      if (!(await claimEvent(tx, input, t))) {
        const result: TransitionResult = { kind: "duplicate" };
        await input.record?.(tx, result);
        return result;
      }
      const result = await changeStatus(tx, input, t);
      // Another delivery changed the invoice first: roll back (the claim too) and read it again.
      if (result === "retry") throw RETRY;
      // Only decisions in effect are remembered: a 404 or 409 may apply once the merchant fixes things.
      if (result.kind === "invalid" || result.kind === "not_found") await releaseEvent(tx, input);
      await input.record?.(tx, result);
      return result;
    }).catch((err: unknown) => {
      if (err === RETRY) return null;
      throw err;
    });
    if (outcome !== null) return outcome;
  }
  throw new Error(`invoice ${input.invoiceId}: status kept changing under ${MAX_ATTEMPTS} attempts`);
}

async function claimEvent(tx: Transaction<Database>, input: ApplyInput, t: number): Promise<boolean> {
  const inserted = await tx
    .insertInto("applied_events")
    .values({ store_id: input.storeId, plugin_name: input.event.pluginName, event_key: input.event.key, delivery_id: input.event.deliveryId, invoice_id: input.invoiceId, created_at: t })
    .onConflict((oc) => oc.columns(["store_id", "plugin_name", "event_key"]).doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1;
}

async function releaseEvent(tx: Transaction<Database>, input: ApplyInput): Promise<void> {
  await tx.deleteFrom("applied_events").where("store_id", "=", input.storeId).where("plugin_name", "=", input.event.pluginName).where("event_key", "=", input.event.key).execute();
}

async function changeStatus(tx: Transaction<Database>, input: ApplyInput, t: number): Promise<TransitionResult | "retry"> {
  const row = await tx.selectFrom("invoices").select(["status"]).where("id", "=", input.invoiceId).where("store_id", "=", input.storeId).executeTakeFirst();
  if (!row) return { kind: "not_found" };
  if (!isInvoiceStatus(row.status)) throw new Error(`invoice ${input.invoiceId} has unknown status ${row.status}`);
  const decision = decideTransition(row.status, input.action);
  const lines: TransitionLogLine[] = [...input.runLogs];
  let result: TransitionResult;
  if (decision.kind === "change") {
    const updated = await tx
      .updateTable("invoices")
      .set({ status: decision.to, updated_at: t })
      .where("id", "=", input.invoiceId)
      .where("store_id", "=", input.storeId)
      .where("status", "=", row.status)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return "retry";
    result = { kind: "changed", from: row.status, to: decision.to };
    lines.push(input.describe(row.status, decision.to));
  } else {
    result = decision.kind === "already" ? { kind: "already", status: row.status } : { kind: "invalid", status: row.status };
  }
  if (lines.length > 0) {
    await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: input.invoiceId, log: l.log, type: l.type, created_at: t }))).execute();
  }
  return result;
}
