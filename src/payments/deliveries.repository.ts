// The delivery log: every webhook (and replay) with its request, the plugin's result, logs and fetches,
// and the response given. Listed newest first with the same keyset paging as the read API.
import { type Insertable, type Kysely, type Selectable, type Transaction, sql } from "kysely";
import type { Database, DeliveriesTable } from "../platform/db/schema.ts";
import { type Cursor, isoTime, takePage } from "../lib/list-query.ts";
import { compiledOnce, paramRow } from "../platform/db/compiled-once.ts";
import type { FetchRecord, LogLine } from "../sandbox/index.ts";

export const DELIVERY_OUTCOMES = [
  "applied",
  "already_applied",
  "ignored",
  "rejected",
  "plugin_error",
  "plugin_timeout",
  /** The store's sandbox queue was full: answered 503, the plugin did not run. */
  "plugin_busy",
  "invalid_transition",
  "invoice_not_found",
  "plugin_not_found",
  /** The same event (eventId, else body hash) was applied by an earlier delivery: nothing changed. */
  "duplicate_event",
  /** SECRETS_KEY cannot open the plugin's secrets: answered 503, the provider retries. */
  "secrets_unavailable",
] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** What the delivery log can be narrowed to; every field optional, all given ones must hold. */
export interface DeliveryFilters {
  pluginName?: string;
  /** One or several outcomes. */
  outcomes?: DeliveryOutcome[];
  invoiceId?: string;
  /** The provider's event id / type (payment.record.ts says where they come from). */
  eventId?: string;
  eventType?: string;
  /** Inclusive bounds on the time the delivery arrived, epoch milliseconds. */
  since?: number;
  until?: number;
}

export interface DeliveryRecord {
  id: string;
  storeId: string;
  pluginName: string;
  pluginVersion: number | null;
  replayOf: string | null;
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  /** As kept: bodies nobody verified are cut (see bodyBytes). */
  body: Buffer;
  /** Size of the body as received. */
  bodyBytes: number;
  outcome: DeliveryOutcome;
  result: unknown;
  error: { kind: string; message: string; line?: number } | null;
  logs: LogLine[];
  fetches: FetchRecord[];
  invoiceId: string | null;
  transition: string | null;
  durationMs: number;
  responseStatus: number;
  responseBody: unknown;
  eventId: string | null;
  eventType: string | null;
  createdAt: number;
}

export interface DeliverySummary {
  id: string;
  pluginName: string;
  pluginVersion: number | null;
  replayOf: string | null;
  outcome: string;
  invoiceId: string | null;
  transition: string | null;
  responseStatus: number;
  durationMs: number;
  eventId: string | null;
  eventType: string | null;
  /** Log lines of type warning or error: an underpayment or an unknown invoice the plugin ignored shows here. */
  warnings: number;
  createdAt: string;
}

export interface DeliveryView extends DeliverySummary {
  request: { method: string; headers: Record<string, string>; query: Record<string, string>; body: string; bodyBase64: string | null };
  result: unknown;
  error: unknown;
  logs: LogLine[];
  fetches: FetchRecord[];
  response: unknown;
}

export interface DeliveriesRepository {
  /** One statement, in the caller's transaction when given. */
  insert(record: DeliveryRecord, tx?: Transaction<Database>): Promise<void>;
  /** Newest first, keyset-paged; each filter is served by an index that starts with the store (migration 0008). */
  list(storeId: string, options: DeliveryFilters & { limit: number; after: Cursor | null }): Promise<{ deliveries: DeliverySummary[]; next: Cursor | null }>;
  /** Oldest first, after a position (created_at, id), for following the log as it grows (`deliveries tail`). */
  listForward(storeId: string, options: DeliveryFilters & { after: Cursor; limit: number }): Promise<DeliverySummary[]>;
  /** How many deliveries match, counting at most `cap` (a huge log is not read through to count it). */
  count(storeId: string, filters: DeliveryFilters, cap: number): Promise<number>;
  get(storeId: string, id: string): Promise<DeliveryView | null>;
  /** The stored request of a delivery, for replay. */
  getRequest(
    storeId: string,
    id: string,
  ): Promise<{ pluginName: string; method: string; headers: Record<string, string>; query: Record<string, string>; body: Buffer; bodyBytes: number; receivedAt: number } | null>;
  /** How the plugin's last `last` deliveries ended: a count per outcome, and when the newest arrived. */
  recentOutcomes(storeId: string, pluginName: string, last: number): Promise<{ total: number; outcomes: Record<string, number>; lastAt: number | null }>;
  pruneOlderThan(cutoffMs: number): Promise<number>;
  /** Deletes each store's oldest deliveries beyond `maxBytes` of bodies kept. */
  pruneStoresOverBytes(maxBytes: number): Promise<number>;
}

const summary = (r: Pick<Selectable<DeliveriesTable>, "id" | "plugin_name" | "plugin_version" | "replay_of" | "outcome" | "invoice_id" | "transition" | "response_status" | "duration_ms" | "event_id" | "event_type" | "logs" | "created_at">): DeliverySummary => ({
  id: r.id,
  pluginName: r.plugin_name,
  pluginVersion: r.plugin_version,
  replayOf: r.replay_of,
  outcome: r.outcome,
  invoiceId: r.invoice_id,
  transition: r.transition,
  responseStatus: r.response_status,
  durationMs: r.duration_ms,
  eventId: r.event_id,
  eventType: r.event_type,
  warnings: countWarnings(r.logs),
  createdAt: isoTime(r.created_at),
});

function countWarnings(logs: string): number {
  if (!logs.includes('"warning"') && !logs.includes('"error"')) return 0;
  return (JSON.parse(logs) as LogLine[]).filter((l) => l.type === "warning" || l.type === "error").length;
}

const isUtf8 = (buf: Buffer) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buf);
    return true;
  } catch {
    return false;
  }
};

export function createDeliveriesRepository(db: Kysely<Database>): DeliveriesRepository {
  function filtered(storeId: string, f: DeliveryFilters) {
    let q = db
      .selectFrom("deliveries")
      .select(["id", "plugin_name", "plugin_version", "replay_of", "outcome", "invoice_id", "transition", "response_status", "duration_ms", "event_id", "event_type", "logs", "created_at"])
      .where("store_id", "=", storeId);
    if (f.pluginName !== undefined) q = q.where("plugin_name", "=", f.pluginName);
    if (f.outcomes !== undefined && f.outcomes.length > 0) q = q.where("outcome", "in", f.outcomes);
    if (f.invoiceId !== undefined) q = q.where("invoice_id", "=", f.invoiceId);
    if (f.eventId !== undefined) q = q.where("event_id", "=", f.eventId);
    if (f.eventType !== undefined) q = q.where("event_type", "=", f.eventType);
    if (f.since !== undefined) q = q.where("created_at", ">=", f.since);
    if (f.until !== undefined) q = q.where("created_at", "<=", f.until);
    return q;
  }

  async function insertRow(d: DeliveryRecord, tx: Kysely<Database> | Transaction<Database>): Promise<void> {
    await insertDelivery(tx, deliveryRow(d));
  }

  return {
    insert: (d, tx) => insertRow(d, tx ?? db),

    async list(storeId, { limit, after, ...filters }) {
      let q = filtered(storeId, filters);
      if (after !== null) q = q.where((eb) => eb(eb.refTuple("created_at", "id"), "<", eb.tuple(after.createdAt, after.id)));
      const rows = await q.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit + 1).execute();
      const { page, next } = takePage(rows, limit);
      return { deliveries: page.map(summary), next };
    },

    async count(storeId, filters, cap) {
      const row = await db
        .selectFrom(filtered(storeId, filters).clearSelect().select("id").limit(cap).as("matching"))
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    async listForward(storeId, { after, limit, ...filters }) {
      const rows = await filtered(storeId, filters)
        .where((eb) => eb(eb.refTuple("created_at", "id"), ">", eb.tuple(after.createdAt, after.id)))
        .orderBy("created_at", "asc")
        .orderBy("id", "asc")
        .limit(limit)
        .execute();
      return rows.map(summary);
    },

    async get(storeId, id) {
      const r = await db.selectFrom("deliveries").selectAll().where("store_id", "=", storeId).where("id", "=", id).executeTakeFirst();
      if (!r) return null;
      const body = Buffer.from(r.body);
      const text = isUtf8(body);
      return {
        ...summary(r),
        request: {
          method: r.method,
          headers: JSON.parse(r.headers) as Record<string, string>,
          query: JSON.parse(r.query) as Record<string, string>,
          body: text ? body.toString("utf8") : "",
          bodyBase64: text ? null : body.toString("base64"),
        },
        result: r.result === null ? null : (JSON.parse(r.result) as unknown),
        error: r.error === null ? null : (JSON.parse(r.error) as unknown),
        logs: JSON.parse(r.logs) as LogLine[],
        fetches: JSON.parse(r.fetches) as FetchRecord[],
        response: JSON.parse(r.response_body) as unknown,
      };
    },

    async getRequest(storeId, id) {
      const r = await db
        .selectFrom("deliveries")
        .select(["plugin_name", "method", "headers", "query", "body", "body_bytes", "created_at"])
        .where("store_id", "=", storeId)
        .where("id", "=", id)
        .executeTakeFirst();
      if (!r) return null;
      return {
        pluginName: r.plugin_name,
        method: r.method,
        headers: JSON.parse(r.headers) as Record<string, string>,
        query: JSON.parse(r.query) as Record<string, string>,
        body: Buffer.from(r.body),
        bodyBytes: r.body_bytes ?? r.body.length,
        receivedAt: r.created_at,
      };
    },

    async pruneStoresOverBytes(maxBytes) {
      // Newest first per store, a running total of the bodies kept; everything past the cap goes.
      const over = db
        .selectFrom((eb) =>
          eb
            .selectFrom("deliveries")
            .select(["id", sql<number>`sum(length(body)) over (partition by store_id order by created_at desc, id desc)`.as("kept")])
            .as("running"),
        )
        .select("id")
        .where("kept", ">", maxBytes);
      const res = await db.deleteFrom("deliveries").where("id", "in", over).executeTakeFirst();
      return Number(res.numDeletedRows);
    },

    async recentOutcomes(storeId, pluginName, last) {
      // The (store, plugin, created_at) index: the newest `last` rows, nothing else read.
      const rows = await db
        .selectFrom("deliveries")
        .select(["outcome", "created_at"])
        .where("store_id", "=", storeId)
        .where("plugin_name", "=", pluginName)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc")
        .limit(last)
        .execute();
      const outcomes: Record<string, number> = {};
      for (const r of rows) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
      return { total: rows.length, outcomes, lastAt: rows.length === 0 ? null : Number(rows[0]!.created_at) };
    },
    async pruneOlderThan(cutoffMs) {
      const res = await db.deleteFrom("deliveries").where("created_at", "<", cutoffMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}

/** A delivery's row as stored. */
export type DeliveryRow = Insertable<DeliveriesTable>;

/** Every column of a delivery's row (an insert compiled once names them all: payment.apply.ts). */
export const DELIVERY_COLUMNS: Record<keyof DeliveryRow, true> = {
  id: true,
  store_id: true,
  plugin_name: true,
  plugin_version: true,
  replay_of: true,
  method: true,
  headers: true,
  query: true,
  body: true,
  body_bytes: true,
  outcome: true,
  result: true,
  error: true,
  logs: true,
  fetches: true,
  invoice_id: true,
  transition: true,
  duration_ms: true,
  response_status: true,
  response_body: true,
  event_id: true,
  event_type: true,
  created_at: true,
};

export function deliveryRow(d: DeliveryRecord): DeliveryRow {
  return {
    id: d.id,
    store_id: d.storeId,
    plugin_name: d.pluginName,
    plugin_version: d.pluginVersion,
    replay_of: d.replayOf,
    method: d.method,
    headers: JSON.stringify(d.headers),
    query: JSON.stringify(d.query),
    body: d.body,
    body_bytes: d.bodyBytes,
    outcome: d.outcome,
    result: d.result === undefined || d.result === null ? null : JSON.stringify(d.result),
    error: d.error === null ? null : JSON.stringify(d.error),
    logs: JSON.stringify(d.logs),
    fetches: JSON.stringify(d.fetches),
    invoice_id: d.invoiceId,
    transition: d.transition,
    duration_ms: Math.round(d.durationMs * 1000) / 1000,
    response_status: d.responseStatus,
    response_body: JSON.stringify(d.responseBody),
    event_id: d.eventId,
    event_type: d.eventType,
    created_at: d.createdAt,
  };
}

/** A delivery's row insert, for the caller to run (alone, or with the payment it records: payment.apply.ts). */
export function deliveryInsert(tx: Kysely<Database> | Transaction<Database>, row: DeliveryRow) {
  return tx.insertInto("deliveries").values(row);
}

/** The same insert, built once: a delivery is recorded on every webhook, answered or not. */
export const insertDelivery = compiledOnce<DeliveryRow>("delivery record", (db, param) => deliveryInsert(db, paramRow(param, DELIVERY_COLUMNS)));
