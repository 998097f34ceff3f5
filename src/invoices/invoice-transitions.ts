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
import { appendEvent, type NewEvent } from "../events/events.repository.ts";
import { invoiceEventType } from "../events/events.types.ts";
import { decideTransition, isInvoiceStatus, type InvoiceAction } from "./invoice-state.ts";
import { toInvoice } from "../readmodel/invoice-documents.ts";
import { type InvoiceSnapshot, readInvoiceSnapshot } from "./invoices.repository.ts";
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

type Executor = Kysely<Database> | Transaction<Database>;

/** A transition decided from a snapshot, not yet written: what the writers below write. */
export interface TransitionPlan {
  result: Exclude<TransitionResult, { kind: "not_found" }>;
  /** The compare-and-set, when the status changes. */
  change: { from: InvoiceStatus; to: InvoiceStatus } | null;
  /** The invoice's new log lines (the extra lines, then the transition's own). */
  lines: { invoice_id: string; log: string; type: string; created_at: number }[];
  /** The change's event, showing the invoice as the list shows it now. */
  event: NewEvent | null;
  at: number;
}

/** What `input` does to the invoice of `snapshot` at time `t`: the state machine's answer, as rows to write. */
export function planTransition(snapshot: InvoiceSnapshot, input: TransitionInput, t: number): TransitionPlan {
  const from = snapshot.row.status;
  if (!isInvoiceStatus(from)) throw new Error(`invoice ${input.invoiceId} has unknown status ${from}`);
  const decision = decideTransition(from, input.action);
  const lines = [...(input.extraLines ?? [])];
  if (decision.kind === "change") lines.push(input.describe(from, decision.to));
  const rows = lines.map((l) => ({ invoice_id: input.invoiceId, log: l.log, type: l.type, created_at: t }));
  if (decision.kind !== "change") {
    const result = decision.kind === "already" ? { kind: "already" as const, status: from } : { kind: "invalid" as const, status: from };
    return { result, change: null, lines: rows, event: null, at: t };
  }
  const invoice = toInvoice({ ...snapshot.row, status: decision.to, updated_at: t }, snapshot.fields, snapshot.items, [...snapshot.logs, ...rows]);
  return {
    result: { kind: "changed", from, to: decision.to },
    change: { from, to: decision.to },
    lines: rows,
    event: { storeId: input.storeId, type: invoiceEventType(decision.to), data: { invoice }, createdAt: t },
    at: t,
  };
}

/** The compare-and-set of a planned change: one row updated, or none when the status moved meanwhile. */
export function compareAndSet(tx: Executor, input: Pick<TransitionInput, "storeId" | "invoiceId">, plan: { change: { from: InvoiceStatus; to: InvoiceStatus }; at: number }) {
  return tx
    .updateTable("invoices")
    .set({ status: plan.change.to, updated_at: plan.at })
    .where("id", "=", input.invoiceId)
    .where("store_id", "=", input.storeId)
    .where("status", "=", plan.change.from);
}

/** The planned log lines' insert (call only when there are some). */
export function linesInsert(tx: Executor, plan: Pick<TransitionPlan, "lines">) {
  return tx.insertInto("invoice_logs").values(plan.lines);
}

/**
 * One attempt inside the caller's transaction, one statement after another. "retry": the status changed
 * between the read and the compare-and-set; nothing was written by this call, and the caller's transaction
 * should be run again.
 */
export async function transitionInTransaction(tx: Transaction<Database>, input: TransitionInput, now: () => number): Promise<TransitionResult | "retry"> {
  const snapshot = await readInvoiceSnapshot(tx, input.storeId, input.invoiceId);
  if (snapshot === null) return { kind: "not_found" };
  const plan = planTransition(snapshot, input, now());
  if (plan.change !== null) {
    const updated = await compareAndSet(tx, input, { ...plan, change: plan.change }).executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return "retry"; // another action changed it first
  }
  if (plan.lines.length > 0) await linesInsert(tx, plan).execute();
  if (plan.event !== null) await appendEvent(tx, plan.event);
  return plan.result;
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
