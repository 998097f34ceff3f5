// Outbound webhook endpoints and the record of every attempt made to them.
import { type Kysely, type Selectable, SqliteAdapter, type Transaction, type Updateable, sql } from "kysely";
import type { Database, EventAttemptsTable, EventEndpointsTable } from "../platform/db/schema.ts";
import { type Cursor, takePage } from "../lib/list-query.ts";
import type { OutboundBacklog } from "../platform/ops/metrics.ts";

export type EndpointRow = Selectable<EventEndpointsTable>;
export type AttemptRow = Selectable<EventAttemptsTable>;
/** An attempt with the state of its delivery: whether, and when, it is tried again. */
export type AttemptWithDelivery = AttemptRow & { delivery_status: string | null; delivery_attempts: number | null; next_attempt_at: number | null };

export interface EndpointsRepository {
  insert(row: Omit<EndpointRow, "api_version"> & { api_version?: string }): Promise<void>;
  list(storeId: string): Promise<EndpointRow[]>;
  get(storeId: string, id: string): Promise<EndpointRow | null>;
  update(storeId: string, id: string, changes: Updateable<EventEndpointsTable>): Promise<boolean>;
  /** Deletes the endpoint and cancels what was still to be sent to it. */
  remove(storeId: string, id: string, at: number): Promise<boolean>;
  attempts(storeId: string, endpointId: string, options: { limit: number; after: Cursor | null; eventId?: string }): Promise<{ attempts: AttemptWithDelivery[]; next: Cursor | null }>;
  /** Cancels the endpoint's pending deliveries (it was disabled). */
  cancelPending(endpointId: string, at: number): Promise<void>;
  /** What is still to be sent, every store together (metrics); read through the pending deliveries' index. */
  backlog(now: number): Promise<OutboundBacklog>;
}

export function createEndpointsRepository(db: Kysely<Database>): EndpointsRepository {
  return {
    async insert(row) {
      await db.insertInto("event_endpoints").values(row).execute();
    },
    async list(storeId) {
      return db.selectFrom("event_endpoints").selectAll().where("store_id", "=", storeId).orderBy("created_at").orderBy("id").execute();
    },
    async get(storeId, id) {
      return (await db.selectFrom("event_endpoints").selectAll().where("store_id", "=", storeId).where("id", "=", id).executeTakeFirst()) ?? null;
    },
    async update(storeId, id, changes) {
      const res = await db.updateTable("event_endpoints").set(changes).where("store_id", "=", storeId).where("id", "=", id).executeTakeFirst();
      return Number(res.numUpdatedRows) === 1;
    },
    async remove(storeId, id, at) {
      return db.transaction().execute(async (tx) => {
        const res = await tx.deleteFrom("event_endpoints").where("store_id", "=", storeId).where("id", "=", id).executeTakeFirst();
        await tx.updateTable("event_deliveries").set({ status: "cancelled", updated_at: at }).where("endpoint_id", "=", id).where("status", "=", "pending").execute();
        return Number(res.numDeletedRows) === 1;
      });
    },
    async attempts(storeId, endpointId, { limit, after, eventId }) {
      let q = db
        .selectFrom("event_attempts as a")
        .leftJoin("event_deliveries as d", "d.id", "a.delivery_id")
        .selectAll("a")
        .select(["d.status as delivery_status", "d.attempts as delivery_attempts", "d.next_attempt_at"])
        .where("a.store_id", "=", storeId)
        .where("a.endpoint_id", "=", endpointId);
      if (eventId !== undefined) q = q.where("a.event_id", "=", eventId);
      if (after !== null) q = q.where((eb) => eb(eb.refTuple("a.created_at", "a.id"), "<", eb.tuple(after.createdAt, after.id)));
      const rows = await q.orderBy("a.created_at", "desc").orderBy("a.id", "desc").limit(limit + 1).execute();
      const { page, next } = takePage(rows, limit);
      return { attempts: page, next };
    },
    async backlog(now) {
      const row = await db
        .selectFrom("event_deliveries")
        .select((eb) => [
          eb.fn.sum<number | string | null>(sql`case when claim_token is not null then 1 else 0 end`).as("in_flight"),
          eb.fn.sum<number | string | null>(sql`case when claim_token is null and next_attempt_at <= ${now} then 1 else 0 end`).as("due"),
          eb.fn.sum<number | string | null>(sql`case when claim_token is null and next_attempt_at > ${now} then 1 else 0 end`).as("retrying"),
          eb.fn.min("created_at").as("oldest"),
        ])
        // A literal, as the dispatcher's claim: SQLite uses the partial index only for a condition it can see.
        .where("status", "=", sql.lit("pending"))
        .executeTakeFirstOrThrow();
      return { due: Number(row.due ?? 0), retrying: Number(row.retrying ?? 0), inFlight: Number(row.in_flight ?? 0), oldestCreatedAt: row.oldest === null ? null : Number(row.oldest) };
    },
    async cancelPending(endpointId, at) {
      await db.updateTable("event_deliveries").set({ status: "cancelled", updated_at: at }).where("endpoint_id", "=", endpointId).where("status", "=", "pending").execute();
    },
  };
}

/**
 * A manual resend's plan, in the resend's transaction: the endpoints it goes to (one, or every enabled one
 * that wants the type), their rows locked on PostgreSQL so that two resends of one event queue it once,
 * and the deliveries of this event to them still pending: those are sent (brought forward) rather than
 * queued a second time.
 */
export async function resendPlan(tx: Transaction<Database>, event: { id: string; storeId: string; type: string }, endpointId: string | undefined) {
  let q = tx.selectFrom("event_endpoints").select(["id", "types"]).where("store_id", "=", event.storeId).where("enabled", "=", 1);
  if (endpointId !== undefined) q = q.where("id", "=", endpointId);
  if (!(tx.getExecutor().adapter instanceof SqliteAdapter)) q = q.orderBy("id").forUpdate();
  const targets = (await q.execute()).filter((e) => endpointId !== undefined || e.types === "" || e.types.split(" ").includes(event.type)).map((e) => e.id);
  if (targets.length === 0) return { targets, pending: [] };
  const pending = await tx
    .selectFrom("event_deliveries")
    .select(["id", "endpoint_id", "claim_token"])
    .where("event_id", "=", event.id)
    .where("endpoint_id", "in", targets)
    .where("status", "=", sql.lit("pending"))
    .execute();
  return { targets, pending };
}

/** Pending deliveries made due now, unless an attempt is under way (its result decides what follows). */
export async function bringForward(tx: Transaction<Database>, deliveryIds: string[], at: number): Promise<void> {
  if (deliveryIds.length === 0) return;
  await tx.updateTable("event_deliveries").set({ next_attempt_at: at, updated_at: at }).where("id", "in", deliveryIds).where("claim_token", "is", null).where("status", "=", "pending").execute();
}
