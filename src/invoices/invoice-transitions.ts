// Applies an action to an invoice through the state machine (invoice-state.ts): the status change, its
// log line, any extra log lines, the applied provider event and the caller's record (a delivery) commit
// together or not at all, durably (src/db/durable.ts) before the caller answers.
// Every status change of the service comes through `transitionInTransaction`, the one place where a
// change is written: plugin results, expiry, cancel and refund. The change is a compare-and-set on the
// status read, so concurrent actions (in one process or many on one PostgreSQL) change an invoice at
// most once; a loser re-reads and sees "already" or "invalid". A plugin's event is applied once: its key
// is claimed first in the same transaction, and a key claimed before makes the delivery a duplicate.
import { type Kysely, type Transaction, sql } from "kysely";
import { durableTransaction } from "../db/durable.ts";
import type { Database } from "../db/schema.ts";
import { decideTransition, isInvoiceStatus, type InvoiceAction } from "./invoice-state.ts";
import { appendInvoiceEvent } from "../events/invoice-events.ts";
import { refreshReadModel } from "../lib/read-model.ts";
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
  /** The provider event was applied before (by an earlier delivery): nothing changes. */
  | { kind: "duplicate" };

export interface ApplyInput {
  storeId: string;
  invoiceId: string;
  action: InvoiceAction;
  /** The transition's own line, given the statuses. */
  describe: (from: InvoiceStatus, to: InvoiceStatus) => TransitionLogLine;
  /** A plugin run's log() lines: appended to the invoice whatever the outcome, when the invoice exists. */
  runLogs?: TransitionLogLine[];
  /** A plugin's event: its key ("id:<eventId>" or "sha256:<body hex>") and the delivery applying it. */
  event?: { pluginName: string; key: string; deliveryId: string };
  /** Written in the same transaction (the delivery record), once the outcome is known. */
  record?: (tx: Transaction<Database>, result: TransitionResult) => Promise<void>;
}

const MAX_ATTEMPTS = 5;

/**
 * One attempt inside the caller's transaction. "retry" means the status changed between the read and the
 * compare-and-set: nothing was written, and the caller's transaction should be retried as a whole.
 */
export async function transitionInTransaction(tx: Transaction<Database>, input: ApplyInput, now: () => number): Promise<TransitionResult | "retry"> {
  // Claim the event first: a concurrent delivery of the same event waits here for this one to end.
  if (input.event && !(await claimEvent(tx, input.event, input, now()))) {
    const result: TransitionResult = { kind: "duplicate" };
    await input.record?.(tx, result);
    return result;
  }
  const result = await changeStatus(tx, input, now);
  if (input.event && (result === "retry" || result.kind === "invalid" || result.kind === "not_found")) {
    // Nothing written on "retry"; and only decisions in effect are remembered (a 404 or 409 may apply
    // once the merchant fixes things).
    await releaseEvent(tx, input.event, input);
  }
  if (result !== "retry") await input.record?.(tx, result);
  return result;
}

async function claimEvent(tx: Transaction<Database>, event: NonNullable<ApplyInput["event"]>, input: ApplyInput, t: number): Promise<boolean> {
  const inserted = await tx
    .insertInto("applied_events")
    .values({ store_id: input.storeId, plugin_name: event.pluginName, event_key: event.key, delivery_id: event.deliveryId, invoice_id: input.invoiceId, created_at: t })
    .onConflict((oc) => oc.columns(["store_id", "plugin_name", "event_key"]).doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1;
}

async function releaseEvent(tx: Transaction<Database>, event: NonNullable<ApplyInput["event"]>, input: ApplyInput): Promise<void> {
  await tx.deleteFrom("applied_events").where("store_id", "=", input.storeId).where("plugin_name", "=", event.pluginName).where("event_key", "=", event.key).execute();
}

async function changeStatus(tx: Transaction<Database>, input: ApplyInput, now: () => number): Promise<TransitionResult | "retry"> {
  const row = await tx.selectFrom("invoices").select(["status"]).where("id", "=", input.invoiceId).where("store_id", "=", input.storeId).executeTakeFirst();
  if (!row) return { kind: "not_found" };
  if (!isInvoiceStatus(row.status)) throw new Error(`invoice ${input.invoiceId} has unknown status ${row.status}`);
  const decision = decideTransition(row.status, input.action);
  const t = now();
  let result: TransitionResult;
  const lines: TransitionLogLine[] = [...(input.runLogs ?? [])];
  if (decision.kind === "change") {
    const updated = await tx
      .updateTable("invoices")
      .set({ status: decision.to, updated_at: t })
      .where("id", "=", input.invoiceId)
      .where("store_id", "=", input.storeId)
      .where("status", "=", row.status)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return "retry"; // another action changed it first
    result = { kind: "changed", from: row.status, to: decision.to };
    lines.push(input.describe(row.status, decision.to));
  } else {
    result = decision.kind === "already" ? { kind: "already", status: row.status } : { kind: "invalid", status: row.status };
  }
  if (lines.length > 0) {
    await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: input.invoiceId, log: l.log, type: l.type, created_at: t }))).execute();
  }
  // The read model's document of this invoice (and its customer) follows in the same transaction.
  if (lines.length > 0) await refreshReadModel(tx, input.storeId, input.invoiceId);
  // Every status change writes its event (CONTRACT §9) in this same transaction.
  if (result.kind === "changed") await appendInvoiceEvent(tx, input.storeId, input.invoiceId, result.to, t);
  return result;
}

/** Applies one action in its own transaction, retrying when another action changed the invoice first. */
export async function applyTransition(db: Kysely<Database>, input: ApplyInput, now: () => number): Promise<TransitionResult> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const outcome = await durableTransaction(db, (tx) => transitionInTransaction(tx, input, now));
    if (outcome !== "retry") return outcome;
  }
  throw new Error(`invoice ${input.invoiceId}: status kept changing under ${MAX_ATTEMPTS} attempts`);
}

/** The webhook's name for applyTransition (a plugin's pushInvoice / disputeInvoice). */
export const applyPluginAction = applyTransition;

export interface ExpireBatchInput {
  /** Invoices created before this instant (epoch ms) and still pending expire. */
  createdBefore: number;
  limit: number;
  /** PostgreSQL: claim the batch with FOR UPDATE SKIP LOCKED so concurrent processes take different rows. */
  skipLocked: boolean;
  describe: (from: InvoiceStatus, to: InvoiceStatus) => TransitionLogLine;
}

/**
 * Claims up to `limit` pending invoices past their payment window and expires each through
 * transitionInTransaction, all in one transaction. Returns the invoices it expired (and how many it
 * claimed, so the caller knows whether to take another batch).
 */
export async function expireBatch(db: Kysely<Database>, input: ExpireBatchInput, now: () => number): Promise<{ claimed: number; expired: { storeId: string; invoiceId: string }[] }> {
  return db.transaction().execute(async (tx) => {
    let claim = tx
      .selectFrom("invoices")
      .select(["id", "store_id"])
      // A literal, not a parameter: the planner then knows the partial index invoices_pending_created applies.
      .where("status", "=", sql.lit("pending"))
      .where("created_at", "<", input.createdBefore)
      .orderBy("created_at")
      .limit(input.limit);
    if (input.skipLocked) claim = claim.forUpdate().skipLocked();
    const rows = await claim.execute();
    const expired: { storeId: string; invoiceId: string }[] = [];
    for (const row of rows) {
      const result = await transitionInTransaction(tx, { storeId: row.store_id, invoiceId: row.id, action: "expire", describe: input.describe }, now);
      // A claimed row cannot change under us on PostgreSQL (locked), nor on SQLite (one writer): "retry"
      // would only mean someone else expired or paid it, so it is skipped.
      if (result !== "retry" && result.kind === "changed") expired.push({ storeId: row.store_id, invoiceId: row.id });
    }
    return { claimed: rows.length, expired };
  });
}
