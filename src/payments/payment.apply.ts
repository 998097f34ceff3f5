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
// each built and compiled once (compiled-once.ts): building a statement cost more than running it.
// On PostgreSQL each statement is a round trip with its own executor start: they go as one statement (data-
// modifying WITH clauses, the compare-and-set made conditional on the claim), so a payment is BEGIN, the
// read, the writes and COMMIT. Either way a lost claim or compare-and-set throws RetryPayment: the caller
// rolls back and runs the transaction again, whose read then sees the event applied (a duplicate) or the
// invoice's new status.
//
// Only decisions in effect are remembered: a 404 or 409 may apply once the merchant fixes things, so it
// takes no claim.
import { type Insertable, type QueryCreator, SqliteAdapter, type Transaction, sql } from "kysely";
import type { AppliedEventsTable, Database } from "../platform/db/schema.ts";
import { compiledOnce, type CompiledOnce, paramRow } from "../platform/db/compiled-once.ts";
import type { PluginAction } from "../invoices/invoice-state.ts";
import { compareAndSet, linesInsert, planTransition, type TransitionLogLine, type TransitionPlan, type TransitionResult } from "../invoices/invoice-transitions.ts";
import { readPaymentSnapshot } from "../invoices/invoices.repository.ts";
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";
import { eventInsert, fanOutInsert, NEW_EVENT_COLUMNS, newEventRow, queued } from "../events/events.repository.ts";
import type { EventType } from "../events/events.types.ts";
import { newId } from "../lib/ids.ts";
import { type DeliveryRecord, type DeliveryRow, deliveryInsert, deliveryRow, insertDelivery } from "./deliveries.repository.ts";

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

/** Applies the payment in the caller's transaction and writes `record`'s row for it (when given). */
export async function applyPayment(tx: Transaction<Database>, p: PaymentToApply, now: () => number, record?: RecordOf): Promise<Applied> {
  const snapshot = await readPaymentSnapshot(tx, p.storeId, p.invoiceId, { pluginName: p.pluginName, eventKey: p.eventKey });
  const done = async (applied: Applied) => {
    if (record !== undefined) await insertDelivery(tx, deliveryRow(record(applied)));
    return applied;
  };
  if (snapshot === null) return done((await seenBefore(tx, p)) ? { kind: "duplicate" } : { kind: "not_found" });
  if (snapshot.seen) return done({ kind: "duplicate" });
  const plan = planTransition(snapshot, { storeId: p.storeId, invoiceId: p.invoiceId, action: p.action, extraLines: p.runLines, describe: (from, to) => paymentLine(p, from, to) }, now());
  const recorded = record?.(plan.result);
  const writes = { plan, claim: plan.result.kind !== "invalid", eventId: newId("evt"), record: recorded === undefined ? null : deliveryRow(recorded) };
  const written = tx.getExecutor().adapter instanceof SqliteAdapter ? await writeOneByOne(tx, p, writes) : await writeAsOneStatement(tx, p, writes);
  if (!written.claimed || !written.changed) throw new RetryPayment();
  queued(written.endpoints);
  return plan.result;
}

interface Writes {
  plan: TransitionPlan;
  /** Whether the event is claimed (not for a transition that does not apply). */
  claim: boolean;
  eventId: string;
  record: DeliveryRow | null;
}

interface Written {
  /** False when the claim was taken by another delivery of the event meanwhile. */
  claimed: boolean;
  /** False when the compare-and-set found the status moved. */
  changed: boolean;
  /** The endpoints the event's deliveries were queued for. */
  endpoints: string[];
}

/** The event's claim: its key, taken by the delivery that applies it. */
type ClaimRow = Insertable<AppliedEventsTable>;

function claimRow(p: PaymentToApply, at: number): ClaimRow {
  return { store_id: p.storeId, plugin_name: p.pluginName, event_key: p.eventKey, delivery_id: p.deliveryId, invoice_id: p.invoiceId, created_at: at };
}

function claimInsert(tx: Transaction<Database> | QueryCreator<Database>, row: ClaimRow) {
  return tx.insertInto("applied_events").values(row).onConflict((oc) => oc.columns(["store_id", "plugin_name", "event_key"]).doNothing());
}

type LogRow = TransitionPlan["lines"][number];

/** SQLite's statements of a payment, each built once (the log lines once per number of lines, up to 16). */
const once = {
  claim: compiledOnce<ClaimRow>("payment claim", (db, param) =>
    claimInsert(db, paramRow(param, { store_id: true, plugin_name: true, event_key: true, delivery_id: true, invoice_id: true, created_at: true })),
  ),
  compareAndSet: compiledOnce<{ storeId: string; invoiceId: string; from: InvoiceStatus; to: InvoiceStatus; at: number }>("payment compare-and-set", (db, param) =>
    compareAndSet(db, { storeId: param((i) => i.storeId), invoiceId: param((i) => i.invoiceId) }, { change: { from: param((i) => i.from), to: param((i) => i.to) }, at: param((i) => i.at) }),
  ),
  event: compiledOnce<ReturnType<typeof newEventRow>>("payment event", (db, param) => eventInsert(db, paramRow(param, NEW_EVENT_COLUMNS))),
  fanOut: compiledOnce<{ id: string; storeId: string; type: EventType; at: number }, { endpoint_id: string }>("payment fan-out", (db, param) =>
    fanOutInsert(db, { id: param((i) => i.id), storeId: param((i) => i.storeId), type: param((i) => i.type) }, param((i) => i.at)),
  ),
  lines: new Map<number, CompiledOnce<LogRow[], unknown>>(),
};
const LINES_SHAPES_MAX = 16;

function insertLines(tx: Transaction<Database>, lines: LogRow[]): Promise<unknown> {
  if (lines.length > LINES_SHAPES_MAX) return linesInsert(tx, { lines }).execute();
  let insert = once.lines.get(lines.length);
  if (insert === undefined) {
    insert = compiledOnce<LogRow[]>(`payment log lines (${lines.length})`, (db, param) =>
      linesInsert(db, { lines: lines.map((_, i) => paramRow<LogRow>((pick) => param((rows) => pick(rows[i]!)), { invoice_id: true, log: true, type: true, created_at: true })) }),
    );
    once.lines.set(lines.length, insert);
  }
  return insert(tx, lines);
}

const affected = (r: { numAffectedRows?: bigint }) => Number(r.numAffectedRows ?? 0n);

async function writeOneByOne(tx: Transaction<Database>, p: PaymentToApply, w: Writes): Promise<Written> {
  const { plan } = w;
  if (w.claim && affected(await once.claim(tx, claimRow(p, plan.at))) !== 1) return { claimed: false, changed: false, endpoints: [] };
  if (plan.change !== null && affected(await once.compareAndSet(tx, { storeId: p.storeId, invoiceId: p.invoiceId, ...plan.change, at: plan.at })) !== 1) return { claimed: true, changed: false, endpoints: [] };
  if (plan.lines.length > 0) await insertLines(tx, plan.lines);
  let endpoints: string[] = [];
  if (plan.event !== null) {
    await once.event(tx, newEventRow(w.eventId, plan.event));
    endpoints = (await once.fanOut(tx, { id: w.eventId, storeId: p.storeId, type: plan.event.type, at: plan.at })).rows.map((r) => r.endpoint_id);
  }
  if (w.record !== null) await insertDelivery(tx, w.record);
  return { claimed: true, changed: true, endpoints };
}

/**
 * The same writes as one PostgreSQL statement. Every WITH clause runs, whatever the others did; the
 * compare-and-set runs only when the claim was taken, and the statement says whether each happened, so the
 * caller rolls the rest back (RetryPayment) when one did not.
 */
async function writeAsOneStatement(tx: Transaction<Database>, p: PaymentToApply, w: Writes): Promise<Written> {
  const { plan } = w;
  // Kysely's WITH takes any query; the clauses are chained on an untyped builder (their names are not tables).
  let q = tx as unknown as QueryCreator<Record<string, Record<string, unknown>>>;
  const clause = (name: string, query: { toOperationNode(): unknown }) => {
    q = q.with(name, () => query as never) as unknown as typeof q;
  };
  if (w.claim) clause("claim", claimInsert(tx, claimRow(p, plan.at)).returning("event_key"));
  if (plan.change !== null) {
    const cas = compareAndSet(tx, p, { ...plan, change: plan.change });
    clause("cas", (w.claim ? cas.where(sql<boolean>`exists (select 1 from claim)`) : cas).returning("id"));
  }
  if (plan.lines.length > 0) clause("lines", linesInsert(tx, plan));
  if (plan.event !== null) {
    clause("event", eventInsert(tx, newEventRow(w.eventId, plan.event)));
    clause("fan_out", fanOutInsert(tx, { id: w.eventId, storeId: p.storeId, type: plan.event.type }, plan.at));
  }
  if (w.record !== null) clause("record", deliveryInsert(tx, w.record));
  const row = await q
    .selectNoFrom([
      (w.claim ? sql<number>`(select count(*) from claim)` : sql<number>`1`).as("claimed"),
      (plan.change !== null ? sql<number>`(select count(*) from cas)` : sql<number>`1`).as("changed"),
      (plan.event !== null ? sql<string[]>`(select coalesce(json_agg(endpoint_id), '[]'::json) from fan_out)` : sql<string[]>`'[]'::json`).as("endpoints"),
    ])
    .executeTakeFirstOrThrow();
  return { claimed: Number(row.claimed) === 1, changed: Number(row.changed) === 1, endpoints: row.endpoints as string[] };
}

/** Whether the event was applied in this store before (asked when its invoice is not there). */
async function seenBefore(tx: Transaction<Database>, p: PaymentToApply): Promise<boolean> {
  const row = await tx.selectFrom("applied_events").select("event_key").where("store_id", "=", p.storeId).where("plugin_name", "=", p.pluginName).where("event_key", "=", p.eventKey).executeTakeFirst();
  return row !== undefined;
}

/** `ignore` changes no status; its log lines still go on the invoice it names, if it is this store's. */
export async function attachRunLines(tx: Transaction<Database>, storeId: string, invoiceId: string, lines: TransitionLogLine[], at: number): Promise<boolean> {
  const own = await tx.selectFrom("invoices").select("id").where("id", "=", invoiceId).where("store_id", "=", storeId).executeTakeFirst();
  if (!own) return false;
  await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: invoiceId, log: l.log, type: l.type, created_at: at }))).execute();
  return true;
}
