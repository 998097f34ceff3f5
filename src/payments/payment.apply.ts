// Step 4 of a payment: the plugin's decision applied, with the delivery's record, inside the payment's
// durable transaction. One read (the invoice with its children, and whether this event was applied before),
// then the state machine plans the writes (invoice-transitions.ts), then they are written:
//
//   the claim        the event's row in applied_events (its primary key: a concurrent delivery of the same
//                    event waits on it, then finds it taken);
//   the change       the compare-and-set of the status, its log lines, its event with the fan-out;
//   the record       the delivery's row (payment.record.ts), with the answer the provider gets.
//
// On SQLite they are statements of the one writer, one after another (in-process, each costs microseconds),
// each built and compiled once (compiled-once.ts): building a statement cost more than running it; in the
// group's transaction they run directly on the connection, not through Kysely's executor.
// On PostgreSQL each statement is a round trip, and each costs the server far more than its rows: the writes
// go as one statement (data-modifying WITH clauses over arrays, payment.postgres.ts), which commits on
// its own when commits are durable by default, and the payments whose writes are ready together share it,
// as those whose reads are share a read: a payment is its shares of a read and of a write statement, no
// transaction left open between them
// (durable.ts, runAtomic). A claim or compare-and-set lost to another delivery meanwhile makes that
// statement fail as a whole (storefront_payment_raced(), migration 0024), so nothing of it stays; a group
// is then written again one payment at a time. Either way a lost claim or compare-and-set throws
// RetryPayment: the caller (its transaction rolled back, if there is one) runs the payment again, whose
// read then sees the event applied (a duplicate) or the invoice's new status.
//
// Only decisions in effect are remembered: a 404 or 409 may apply once the merchant fixes things, so it
// takes no claim.
import { type Compilable, type Kysely, SqliteAdapter, type Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { compiledOnce, type CompiledOnce, type Param, paramAt, paramRow } from "../platform/db/compiled-once.ts";
import type { PluginAction } from "../invoices/invoice-state.ts";
import { compareAndSet, linesInsert, planTransition, type TransitionLogLine, type TransitionPlan, type TransitionResult } from "../invoices/invoice-transitions.ts";
import { readPaymentSnapshot } from "../invoices/invoices.repository.ts";
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";
import { eventInsert, fanOutInsert, NEW_EVENT_COLUMNS, type NewEventRow, newEventRow, queued } from "../events/events.repository.ts";
import { newTimedId } from "../lib/ids.ts";
import { type DeliveryRecord, type DeliveryRow, deliveryRow, insertDelivery } from "./deliveries.repository.ts";
import { type PaymentStatements, writeTogether } from "./payment.postgres.ts";
import type { Change, ClaimRow, FanOut, LogRow, WriteValues, Written } from "./payment.writes.ts";

type Executor = Kysely<Database> | Transaction<Database>;

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

/** The delivery's record for what applying did (written with it). */
export type RecordOf = (applied: Applied) => DeliveryRecord;

/** The status or the claim changed between the read and the writes: run the whole transaction again. */
export class RetryPayment extends Error {
  constructor() {
    super("the invoice or the event's claim changed during the payment's transaction");
  }
}

/** The invoice's line for the change a plugin made. */
export function paymentLine(p: Pick<PaymentToApply, "action" | "pluginName" | "pluginVersion" | "deliveryId">, from: InvoiceStatus, to: InvoiceStatus): TransitionLogLine {
  const by = `plugin ${p.pluginName} v${p.pluginVersion} (delivery ${p.deliveryId})`;
  return p.action === "pushInvoice" ? { log: `Payment confirmed by ${by}: ${from} -> ${to}`, type: "info" } : { log: `Dispute opened, reported by ${by}: ${from} -> ${to}`, type: "warning" };
}

/**
 * Applies the payment and writes `record`'s row for it (when given): in the caller's transaction, or on
 * PostgreSQL with its writes as one statement that commits on its own (`tx` the database); there, with
 * `grouped`, its read and its writes each share a statement with those of the payments ready beside it.
 */
export async function applyPayment(tx: Executor, p: PaymentToApply, now: () => number, record?: RecordOf, grouped?: PaymentStatements): Promise<Applied> {
  const done = async (applied: Applied) => {
    if (record !== undefined) await insertDelivery(tx, deliveryRow(record(applied)));
    return applied;
  };
  // No invoice's id holds a NUL byte (ids are generated), and PostgreSQL could not even be asked for one.
  if (p.invoiceId.includes("\u0000")) return done({ kind: "not_found" });
  const key = { storeId: p.storeId, invoiceId: p.invoiceId, pluginName: p.pluginName, eventKey: p.eventKey };
  const together = tx.isTransaction ? undefined : grouped;
  const snapshot = together === undefined ? await readPaymentSnapshot(tx, key.storeId, key.invoiceId, key) : await together.read(key);
  if (snapshot === null) return done((await seenBefore(tx, p)) ? { kind: "duplicate" } : { kind: "not_found" });
  if (snapshot.seen) return done({ kind: "duplicate" });
  const plan = planTransition(snapshot, { storeId: p.storeId, invoiceId: p.invoiceId, action: p.action, extraLines: p.runLines, describe: (from, to) => paymentLine(p, from, to) }, now());
  const recorded = record?.(plan.result);
  const values = writeValues(p, plan, recorded === undefined ? null : deliveryRow(recorded));
  const written = tx.getExecutor().adapter instanceof SqliteAdapter ? await writeOneByOne(tx, values) : await (together === undefined ? writeTogether(tx, [values]) : together.write(values));
  if (!written.claimed || !written.changed) throw new RetryPayment();
  queued(written.endpoints);
  return plan.result;
}

/** What the plan writes; the event is claimed unless the transition does not apply. */
function writeValues(p: PaymentToApply, plan: TransitionPlan, record: DeliveryRow | null): WriteValues {
  const eventId = newTimedId("evt");
  return {
    claim: plan.result.kind === "invalid" ? null : { store_id: p.storeId, plugin_name: p.pluginName, event_key: p.eventKey, delivery_id: p.deliveryId, invoice_id: p.invoiceId, created_at: plan.at },
    change: plan.change === null ? null : { store_id: p.storeId, invoice_id: p.invoiceId, status_from: plan.change.from, status_to: plan.change.to, at: plan.at },
    lines: plan.lines,
    event: plan.event === null ? null : newEventRow(eventId, plan.event),
    fanOut: plan.event === null ? null : { id: eventId, storeId: p.storeId, type: plan.event.type, at: plan.at },
    record,
  };
}

// SQLite: each write, built with placeholders (compiled-once.ts), run alone in the group's transaction.
const claimQuery = (db: Executor, param: Param<ClaimRow>) =>
  db.insertInto("applied_events").values(paramRow(param, { store_id: true, plugin_name: true, event_key: true, delivery_id: true, invoice_id: true, created_at: true })).onConflict((oc) => oc.columns(["store_id", "plugin_name", "event_key"]).doNothing());
const changeQuery = (db: Executor, param: Param<Change>) =>
  compareAndSet(db, { storeId: param((c) => c.store_id), invoiceId: param((c) => c.invoice_id) }, { change: { from: param((c) => c.status_from), to: param((c) => c.status_to) }, at: param((c) => c.at) });
const linesQuery = (db: Executor, count: number, param: Param<LogRow[]>) =>
  linesInsert(db, { lines: Array.from({ length: count }, (_, i) => paramRow(paramAt(param, (lines) => lines[i]!), { invoice_id: true, log: true, type: true, created_at: true })) });
const eventQuery = (db: Executor, param: Param<NewEventRow>) => eventInsert(db, paramRow(param, NEW_EVENT_COLUMNS));
const fanOutQuery = (db: Executor, param: Param<FanOut>) => fanOutInsert(db, { id: param((f) => f.id), storeId: param((f) => f.storeId), type: param((f) => f.type) }, param((f) => f.at));

/** SQLite: statements of one shape kept at most per kind: the log lines' number (a plugin's log() calls) varies. */
const SHAPES_MAX = 16;

/** SQLite's statements of a payment, each built once (the log lines once per number of lines). */
const sqliteOnce = {
  claim: compiledOnce("payment claim", claimQuery),
  change: compiledOnce("payment compare-and-set", changeQuery),
  lines: new Map<string | number, CompiledOnce<LogRow[], unknown>>(),
  event: compiledOnce("payment event", eventQuery),
  fanOut: compiledOnce<FanOut, { endpoint_id: string }>("payment fan-out", fanOutQuery),
};

/** A statement of a shape: kept while there are few shapes, otherwise built for this run. */
function ofShape<I, R>(kept: Map<string | number, CompiledOnce<I, R>>, key: string | number, what: string, build: (db: Executor, param: Param<I>) => Compilable<R>): CompiledOnce<I, R> {
  let statement = kept.get(key);
  if (statement === undefined) {
    statement = compiledOnce(`${what} (${key})`, build);
    if (kept.size < SHAPES_MAX) kept.set(key, statement);
  }
  return statement;
}

const affected = (r: { numAffectedRows?: bigint }) => Number(r.numAffectedRows ?? 0n);

async function writeOneByOne(tx: Executor, v: WriteValues): Promise<Written> {
  if (v.claim !== null && affected(await sqliteOnce.claim(tx, v.claim)) !== 1) return { claimed: false, changed: false, endpoints: [] };
  if (v.change !== null && affected(await sqliteOnce.change(tx, v.change)) !== 1) return { claimed: true, changed: false, endpoints: [] };
  const count = v.lines.length;
  if (count > 0) await ofShape(sqliteOnce.lines, count, "payment log lines", (db, param) => linesQuery(db, count, param))(tx, v.lines);
  if (v.event !== null) await sqliteOnce.event(tx, v.event);
  const endpoints = v.fanOut === null ? [] : (await sqliteOnce.fanOut(tx, v.fanOut)).rows.map((r) => r.endpoint_id);
  if (v.record !== null) await insertDelivery(tx, v.record);
  return { claimed: true, changed: true, endpoints };
}

/** Whether the event was applied in this store before (asked when its invoice is not there). */
async function seenBefore(tx: Executor, p: PaymentToApply): Promise<boolean> {
  const row = await tx.selectFrom("applied_events").select("event_key").where("store_id", "=", p.storeId).where("plugin_name", "=", p.pluginName).where("event_key", "=", p.eventKey).executeTakeFirst();
  return row !== undefined;
}

/** `ignore` changes no status; its log lines still go on the invoice it names, if it is this store's. */
export async function attachRunLines(tx: Transaction<Database>, storeId: string, invoiceId: string, lines: TransitionLogLine[], at: number): Promise<boolean> {
  if (invoiceId.includes("\u0000")) return false;
  const own = await tx.selectFrom("invoices").select("id").where("id", "=", invoiceId).where("store_id", "=", storeId).executeTakeFirst();
  if (!own) return false;
  await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: invoiceId, log: l.log, type: l.type, created_at: at }))).execute();
  return true;
}
