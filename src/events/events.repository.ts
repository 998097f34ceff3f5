// The event log (outbox). `appendEvent` is called inside the transaction of the change an event
// describes, so the change and its event commit together or not at all; it also queues one delivery
// per subscribed endpoint in that transaction, so a committed event can never miss its webhooks.
//
// Order: an event is written without its number (`seq` null). After it commits, the sequencer
// (events.sequencer.ts) gives the store's committed events their numbers, in a short transaction of
// its own that holds the store's counter row; the feed reads numbered events only. So a reader who has
// seen number N can never later find a smaller one behind it, and no payment holds a per-store lock
// across its commit (docs/decisions/0004-event-feed-order.md).
import { randomBytes } from "node:crypto";
import { type Insertable, type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import type { Database, EventsTable } from "../platform/db/schema.ts";
import { newTimedId } from "../lib/ids.ts";
import type { EventData, EventType, StoredEvent } from "./events.types.ts";

type Executor = Kysely<Database> | Transaction<Database>;

export interface NewEvent {
  storeId: string;
  type: EventType;
  data: EventData;
  createdAt: number;
}

const appendListeners = new Set<(endpointIds: readonly string[]) => void>();

/** Called (in this process) when deliveries were queued, with their endpoints; the dispatcher looks sooner. */
export function onDeliveriesQueued(listener: (endpointIds: readonly string[]) => void): () => void {
  appendListeners.add(listener);
  return () => appendListeners.delete(listener);
}

/** Tells this process's listeners that deliveries were queued for these endpoints (after a write of them). */
export function queued(endpointIds: readonly string[]): void {
  if (endpointIds.length > 0) for (const listener of appendListeners) listener(endpointIds);
}

/** A manual resend: to one endpoint (whatever types it wants), or to every subscribed one. */
export async function queueDeliveries(
  tx: Executor,
  event: { id: string; storeId: string; type: string },
  at: number,
  manual: { endpointId?: string; anyType?: boolean },
): Promise<{ id: string; endpointId: string }[]> {
  let q = tx.selectFrom("event_endpoints").select(["id", "types"]).where("store_id", "=", event.storeId).where("enabled", "=", 1);
  if (manual.endpointId !== undefined) q = q.where("id", "=", manual.endpointId);
  const endpoints = (await q.execute()).filter((e) => manual.anyType === true || e.types === "" || e.types.split(" ").includes(event.type));
  if (endpoints.length === 0) return [];
  const rows = endpoints.map((e) => ({
    id: eventDeliveryId(at),
    store_id: event.storeId,
    event_id: event.id,
    endpoint_id: e.id,
    status: "pending",
    attempts: 0,
    next_attempt_at: at,
    claim_token: null,
    manual: 1,
    created_at: at,
    updated_at: at,
  }));
  await tx.insertInto("event_deliveries").values(rows).execute();
  queued(rows.map((r) => r.endpoint_id));
  return rows.map((r) => ({ id: r.id, endpointId: r.endpoint_id }));
}

/** An event delivery's id as the fan-out makes it (fanOutInsert), for one queued here. */
function eventDeliveryId(at: number): string {
  return `edl_${Math.floor(at).toString(16).padStart(12, "0")}${randomBytes(8).toString("hex")}`;
}

/**
 * A new event's deliveries, one per enabled endpoint of the store that wants its type, in one statement
 * (the endpoints are not read first), returning their endpoints. Their ids are made by the database:
 * `edl_`, 12 hexadecimal characters of the event's time in milliseconds and 16 random ones (64 bits), so
 * that they sort by time like the other ids written on every payment (src/lib/ids.ts, newTimedId; hexadecimal
 * digits are in the base32 alphabet of the other ids). The statement, for the caller to run (or to send
 * with others, payment.apply.ts).
 */
export function fanOutInsert(tx: Executor, event: { id: string; storeId: string; type: EventType }, at: number) {
  const sqlite = tx.getExecutor().adapter instanceof SqliteAdapter;
  const int = (v: number) => sql<number>`cast(${v} as bigint)`;
  const timedId = sqlite
    ? sql<string>`'edl_' || printf('%012x', ${int(at)}) || lower(hex(randomblob(8)))`
    : sql<string>`'edl_' || lpad(to_hex(${int(at)}), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 16)`;
  // Types are a space-separated list ("" = all). A substring test, not LIKE: SQLite prepares a statement
  // again on every run when a LIKE pattern is a parameter (13 µs against 1.4 µs here). Every value is a
  // parameter of its own (the statement is also compiled once, with placeholders: payment.apply.ts).
  const wanted = sql<string>`' ' || cast(${event.type} as text) || ' '`;
  const listed = sql<string>`' ' || e.types || ' '`;
  const wants = sqlite ? sql<boolean>`instr(${listed}, ${wanted}) > 0` : sql<boolean>`strpos(${listed}, ${wanted}) > 0`;
  // Parameters in a select list are typed by casts (PostgreSQL would take them for text).
  const text = (v: string) => sql<string>`cast(${v} as text)`;
  return tx
    .insertInto("event_deliveries")
    .columns(["id", "store_id", "event_id", "endpoint_id", "status", "attempts", "next_attempt_at", "claim_token", "manual", "created_at", "updated_at"])
    .expression((eb) =>
      eb
        .selectFrom("event_endpoints as e")
        .select([
          timedId.as("id"),
          "e.store_id",
          text(event.id).as("event_id"),
          "e.id as endpoint_id",
          sql.lit("pending").as("status"),
          sql.lit(0).as("attempts"),
          int(at).as("next_attempt_at"),
          sql<string | null>`null`.as("claim_token"),
          sql.lit(0).as("manual"),
          int(at).as("created_at"),
          int(at).as("updated_at"),
        ])
        .where("e.store_id", "=", event.storeId)
        .where("e.enabled", "=", sql.lit(1))
        .where((w) => w.or([w("e.types", "=", sql.lit("")), wants])),
    )
    .returning("endpoint_id");
}

/** A new event's row as written (numbered after it commits: `seq` is left null). */
export type NewEventRow = Omit<Insertable<EventsTable>, "seq" | "pos">;

/** Every column a new event's row sets (an insert compiled once names them all: payment.apply.ts). */
export const NEW_EVENT_COLUMNS: Record<keyof NewEventRow, true> = { id: true, store_id: true, type: true, data: true, invoice_id: true, created_at: true };

export function newEventRow(id: string, event: NewEvent): NewEventRow {
  return { id, store_id: event.storeId, type: event.type, data: JSON.stringify(event.data), invoice_id: "invoice" in event.data ? event.data.invoice.id : null, created_at: event.createdAt };
}

/** A new event's row insert, for the caller to run. */
export function eventInsert(tx: Executor, row: NewEventRow) {
  return tx.insertInto("events").values(row);
}

/**
 * Writes an event in the caller's transaction (pass the transaction, never the plain database) and queues
 * its webhooks: two statements. The event gets its number after it commits (events.sequencer.ts).
 */
export async function appendEvent(tx: Transaction<Database>, event: NewEvent): Promise<{ id: string }> {
  const id = newTimedId("evt");
  await eventInsert(tx, newEventRow(id, event)).execute();
  const fanned = await fanOutInsert(tx, { id, storeId: event.storeId, type: event.type }, event.createdAt).execute();
  queued(fanned.map((r) => r.endpoint_id));
  return { id };
}

export interface EventsRepository {
  /** The store's events after `afterSeq`, oldest first. */
  feed(storeId: string, options: { afterSeq: number; types: readonly string[] | null; limit: number }): Promise<StoredEvent[]>;
  /** The store's events newest first, before `beforeSeq` (null: from the newest), narrowed by type and invoice. */
  list(storeId: string, options: { beforeSeq: number | null; types: readonly string[] | null; invoiceId: string | null; limit: number }): Promise<StoredEvent[]>;
  get(storeId: string, eventId: string): Promise<StoredEvent | null>;
  pruneOlderThan(cutoffMs: number): Promise<number>;
}

type EventRow = { id: string; store_id: string; seq: number | null; type: string; data: string; created_at: number };
const toStored = (r: EventRow): StoredEvent => ({ id: r.id, storeId: r.store_id, seq: r.seq === null ? null : Number(r.seq), type: r.type, data: r.data, createdAt: Number(r.created_at) });

export function createEventsRepository(db: Kysely<Database>): EventsRepository {
  return {
    async feed(storeId, { afterSeq, types, limit }) {
      // Numbered events only (the partial indexes on seq hold no others).
      let q = db.selectFrom("events").select(["id", "store_id", "seq", "type", "data", "created_at"]).where("store_id", "=", storeId).where("seq", "is not", null).where("seq", ">", afterSeq);
      if (types !== null) q = q.where("type", "in", types);
      const rows = await q.orderBy("seq").limit(limit).execute();
      return rows.map(toStored);
    },
    async list(storeId, { beforeSeq, types, invoiceId, limit }) {
      // Served by events_store_seq, events_store_type_seq or events_store_invoice_seq, read backwards.
      let q = db.selectFrom("events").select(["id", "store_id", "seq", "type", "data", "created_at"]).where("store_id", "=", storeId).where("seq", "is not", null);
      if (beforeSeq !== null) q = q.where("seq", "<", beforeSeq);
      if (types !== null) q = q.where("type", "in", types);
      if (invoiceId !== null) q = q.where("invoice_id", "=", invoiceId);
      const rows = await q.orderBy("seq", "desc").limit(limit).execute();
      return rows.map(toStored);
    },
    async get(storeId, eventId) {
      const row = await db.selectFrom("events").select(["id", "store_id", "seq", "type", "data", "created_at"]).where("store_id", "=", storeId).where("id", "=", eventId).executeTakeFirst();
      return row ? toStored(row) : null;
    },
    async pruneOlderThan(cutoffMs) {
      // The counter row stays: numbers keep increasing after old events are gone.
      const res = await db.deleteFrom("events").where("created_at", "<", cutoffMs).executeTakeFirst();
      await db.deleteFrom("event_deliveries").where("created_at", "<", cutoffMs).where("status", "!=", "pending").execute();
      await db.deleteFrom("event_attempts").where("created_at", "<", cutoffMs).execute();
      return Number(res.numDeletedRows);
    },
  };
}
