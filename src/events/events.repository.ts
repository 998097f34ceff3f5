// The event log (outbox). `appendEvent` is called inside the transaction of the change an event
// describes, so the change and its event commit together or not at all; it also queues one delivery
// per subscribed endpoint in that transaction, so a committed event can never miss its webhooks.
//
// Order: each store has a counter row whose increment is the transaction's last lock. A second writer
// of the same store waits on that row until the first commits, so a store's sequence numbers commit in
// increasing order without gaps, and a feed reader who has seen number N can never later find a
// smaller one committing behind it (docs/decisions/0004-event-feed-order.md).
import { sql, type Kysely, type Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { newId } from "../lib/ids.ts";
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

/** Queues the event's delivery to every enabled endpoint of the store that wants its type. */
export async function queueDeliveries(
  tx: Executor,
  event: { id: string; storeId: string; type: string },
  at: number,
  /** A manual resend: to one endpoint (whatever types it wants), or to every subscribed one. */
  manual?: { endpointId?: string; anyType?: boolean },
): Promise<{ id: string; endpointId: string }[]> {
  let q = tx.selectFrom("event_endpoints").select(["id", "types"]).where("store_id", "=", event.storeId).where("enabled", "=", 1);
  if (manual?.endpointId !== undefined) q = q.where("id", "=", manual.endpointId);
  const endpoints = (await q.execute()).filter((e) => manual?.anyType === true || e.types === "" || e.types.split(" ").includes(event.type));
  if (endpoints.length === 0) return [];
  const rows = endpoints.map((e) => ({
    id: newId("edl"),
    store_id: event.storeId,
    event_id: event.id,
    endpoint_id: e.id,
    status: "pending",
    attempts: 0,
    next_attempt_at: at,
    claim_token: null,
    manual: manual === undefined ? 0 : 1,
    created_at: at,
    updated_at: at,
  }));
  await tx.insertInto("event_deliveries").values(rows).execute();
  for (const listener of appendListeners) listener(rows.map((r) => r.endpoint_id));
  return rows.map((r) => ({ id: r.id, endpointId: r.endpoint_id }));
}

/**
 * Writes an event in the caller's transaction (pass the transaction, never the plain database) and queues
 * its webhooks. Call it as late as possible in the transaction: it takes the store's counter lock.
 */
export async function appendEvent(tx: Transaction<Database>, event: NewEvent): Promise<{ id: string; seq: number }> {
  const id = newId("evt");
  await queueDeliveries(tx, { id, storeId: event.storeId, type: event.type }, event.createdAt);
  const { last_seq: seq } = await tx
    .insertInto("event_sequences")
    .values({ store_id: event.storeId, last_seq: 1 })
    .onConflict((oc) => oc.column("store_id").doUpdateSet({ last_seq: sql`event_sequences.last_seq + 1` }))
    .returning("last_seq")
    .executeTakeFirstOrThrow();
  await tx
    .insertInto("events")
    .values({
      id,
      store_id: event.storeId,
      seq: Number(seq),
      type: event.type,
      data: JSON.stringify(event.data),
      invoice_id: "invoice" in event.data ? event.data.invoice.id : null,
      created_at: event.createdAt,
    })
    .execute();
  return { id, seq: Number(seq) };
}

export interface EventsRepository {
  /** The store's events after `afterSeq`, oldest first. */
  feed(storeId: string, options: { afterSeq: number; types: readonly string[] | null; limit: number }): Promise<StoredEvent[]>;
  /** The store's events newest first, before `beforeSeq` (null: from the newest), narrowed by type and invoice. */
  list(storeId: string, options: { beforeSeq: number | null; types: readonly string[] | null; invoiceId: string | null; limit: number }): Promise<StoredEvent[]>;
  get(storeId: string, eventId: string): Promise<StoredEvent | null>;
  pruneOlderThan(cutoffMs: number): Promise<number>;
}

type EventRow = { id: string; store_id: string; seq: number; type: string; data: string; created_at: number };
const toStored = (r: EventRow): StoredEvent => ({ id: r.id, storeId: r.store_id, seq: Number(r.seq), type: r.type, data: r.data, createdAt: Number(r.created_at) });

export function createEventsRepository(db: Kysely<Database>): EventsRepository {
  return {
    async feed(storeId, { afterSeq, types, limit }) {
      let q = db.selectFrom("events").select(["id", "store_id", "seq", "type", "data", "created_at"]).where("store_id", "=", storeId).where("seq", ">", afterSeq);
      if (types !== null) q = q.where("type", "in", types);
      const rows = await q.orderBy("seq").limit(limit).execute();
      return rows.map(toStored);
    },
    async list(storeId, { beforeSeq, types, invoiceId, limit }) {
      // Served by events_store_seq, events_store_type_seq or events_store_invoice_seq, read backwards.
      let q = db.selectFrom("events").select(["id", "store_id", "seq", "type", "data", "created_at"]).where("store_id", "=", storeId);
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
