// The one writer of an invoice's status. Every change of the service comes through
// `transitionInTransaction`: plugin results, expiry, cancel and refund. Inside the caller's transaction it
// reads the invoice with its children (one statement), asks the state machine (invoice-state.ts), changes
// the status with a compare-and-set on the status read, appends the log lines, and writes the event with
// the invoice as the list now shows it: four statements for a change, whatever the customer's history.
// Nothing derived is written here: the read model's documents follow after the commit (the triggers mark
// them stale, src/readmodel/projector.ts rebuilds them), so no customer- or store-wide row is locked.
//
// The compare-and-set makes concurrent actions (in one process or many on one PostgreSQL) change an invoice
// at most once; a loser sees "retry", and the caller runs its transaction again.
import { type Kysely, type Transaction, sql } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { appendEvent } from "../events/events.repository.ts";
import { invoiceEventType } from "../events/events.types.ts";
import { decideTransition, isInvoiceStatus, type InvoiceAction } from "./invoice-state.ts";
import { toInvoice } from "../readmodel/invoice-documents.ts";
import { readInvoiceSnapshot } from "./invoices.repository.ts";
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";

export interface TransitionLogLine {
  log: string;
  type: string;
}

export type TransitionResult =
  | { kind: "changed"; from: InvoiceStatus; to: InvoiceStatus }
  | { kind: "already"; status: InvoiceStatus }
  | { kind: "invalid"; status: InvoiceStatus }
  | { kind: "not_found" };

export interface TransitionInput {
  storeId: string;
  invoiceId: string;
  action: InvoiceAction;
  /** The transition's own log line, given the statuses. */
  describe: (from: InvoiceStatus, to: InvoiceStatus) => TransitionLogLine;
  /** Lines appended to the invoice whatever the outcome, when it exists (a plugin run's log() calls). */
  extraLines?: readonly TransitionLogLine[];
}

const MAX_ATTEMPTS = 5;

/**
 * One attempt inside the caller's transaction. "retry": the status changed between the read and the
 * compare-and-set; nothing was written by this call, and the caller's transaction should be run again.
 */
export async function transitionInTransaction(tx: Transaction<Database>, input: TransitionInput, now: () => number): Promise<TransitionResult | "retry"> {
  const snapshot = await readInvoiceSnapshot(tx, input.storeId, input.invoiceId);
  if (snapshot === null) return { kind: "not_found" };
  const from = snapshot.row.status;
  if (!isInvoiceStatus(from)) throw new Error(`invoice ${input.invoiceId} has unknown status ${from}`);
  const decision = decideTransition(from, input.action);
  const t = now();
  const lines = [...(input.extraLines ?? [])];
  let result: TransitionResult;
  if (decision.kind === "change") {
    const updated = await tx
      .updateTable("invoices")
      .set({ status: decision.to, updated_at: t })
      .where("id", "=", input.invoiceId)
      .where("store_id", "=", input.storeId)
      .where("status", "=", from)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return "retry"; // another action changed it first
    result = { kind: "changed", from, to: decision.to };
    lines.push(input.describe(from, decision.to));
  } else {
    result = decision.kind === "already" ? { kind: "already", status: from } : { kind: "invalid", status: from };
  }
  const written = lines.map((l) => ({ log: l.log, type: l.type, created_at: t }));
  if (written.length > 0) await tx.insertInto("invoice_logs").values(written.map((l) => ({ invoice_id: input.invoiceId, ...l }))).execute();
  if (result.kind === "changed") {
    // The event shows the invoice as the list shows it now: the snapshot, moved, with its new lines.
    const invoice = toInvoice({ ...snapshot.row, status: result.to, updated_at: t }, snapshot.fields, snapshot.items, [...snapshot.logs, ...written]);
    await appendEvent(tx, { storeId: input.storeId, type: invoiceEventType(result.to), data: { invoice }, createdAt: t });
  }
  return result;
}

/** Runs `attempt` in transactions from `begin` until it does not answer "retry". */
export async function retryingTransitions<T>(begin: <R>(work: (tx: Transaction<Database>) => Promise<R>) => Promise<R>, attempt: (tx: Transaction<Database>) => Promise<T | "retry">, what: string): Promise<T> {
  for (let i = 0; i < MAX_ATTEMPTS; i++) {
    const outcome = await begin(attempt);
    if (outcome !== "retry") return outcome;
  }
  throw new Error(`${what}: status kept changing under ${MAX_ATTEMPTS} attempts`);
}

/** Applies one action in its own transaction, retrying when another action changed the invoice first. */
export function applyTransition(db: Kysely<Database>, input: TransitionInput, now: () => number): Promise<TransitionResult> {
  return retryingTransitions((work) => db.transaction().execute(work), (tx) => transitionInTransaction(tx, input, now), `invoice ${input.invoiceId}`);
}

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
