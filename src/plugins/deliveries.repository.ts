// The delivery log: every webhook (and replay) with its request, the plugin's result, logs and fetches,
// and the response given. Listed newest first with the same keyset paging as the read API. A plugin run
// that failed writes its `delivery.failed` event (CONTRACT §9) in the transaction of its record.
import type { Kysely, Selectable, Transaction } from "kysely";
import type { Database, DeliveriesTable } from "../db/schema.ts";
import { appendEvent } from "../events/events.repository.ts";
import { type Cursor, isoTime } from "../lib/list-query.ts";
import { takePage } from "../lib/paging.ts";
import type { FetchRecord, LogLine } from "../sandbox/index.ts";

export type DeliveryOutcome =
  | "applied"
  | "already_applied"
  | "ignored"
  | "rejected"
  | "plugin_error"
  | "plugin_timeout"
  | "invalid_transition"
  | "invoice_not_found"
  | "plugin_not_found";

export interface DeliveryRecord {
  id: string;
  storeId: string;
  pluginName: string;
  pluginVersion: number | null;
  replayOf: string | null;
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  body: Buffer;
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
  insert(record: DeliveryRecord, tx?: Transaction<Database>): Promise<void>;
  list(storeId: string, options: { limit: number; after: Cursor | null; pluginName?: string }): Promise<{ deliveries: DeliverySummary[]; next: Cursor | null }>;
  get(storeId: string, id: string): Promise<DeliveryView | null>;
  /** The stored request of a delivery, for replay. */
  getRequest(storeId: string, id: string): Promise<{ pluginName: string; method: string; headers: Record<string, string>; query: Record<string, string>; body: Buffer } | null>;
  pruneOlderThan(cutoffMs: number): Promise<number>;
}

const summary = (r: Pick<Selectable<DeliveriesTable>, "id" | "plugin_name" | "plugin_version" | "replay_of" | "outcome" | "invoice_id" | "transition" | "response_status" | "duration_ms" | "created_at">): DeliverySummary => ({
  id: r.id,
  pluginName: r.plugin_name,
  pluginVersion: r.plugin_version,
  replayOf: r.replay_of,
  outcome: r.outcome,
  invoiceId: r.invoice_id,
  transition: r.transition,
  responseStatus: r.response_status,
  durationMs: r.duration_ms,
  createdAt: isoTime(r.created_at),
});

const isUtf8 = (buf: Buffer) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buf);
    return true;
  } catch {
    return false;
  }
};

/** Outcomes that are a broken plugin run, so the merchant hears of them; rejections are not. */
const FAILED_RUN_OUTCOMES: ReadonlySet<DeliveryOutcome> = new Set(["plugin_error", "plugin_timeout"]);

export function createDeliveriesRepository(db: Kysely<Database>): DeliveriesRepository {
  async function insertRow(d: DeliveryRecord, tx: Kysely<Database>): Promise<void> {
    await tx
      .insertInto("deliveries")
      .values({
        id: d.id,
        store_id: d.storeId,
        plugin_name: d.pluginName,
        plugin_version: d.pluginVersion,
        replay_of: d.replayOf,
        method: d.method,
        headers: JSON.stringify(d.headers),
        query: JSON.stringify(d.query),
        body: d.body,
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
        created_at: d.createdAt,
      })
      .execute();
  }

  async function insertWithEvent(d: DeliveryRecord, tx: Transaction<Database>): Promise<void> {
    await insertRow(d, tx);
    if (FAILED_RUN_OUTCOMES.has(d.outcome)) {
      await appendEvent(tx, {
        storeId: d.storeId,
        type: "delivery.failed",
        data: { delivery: { id: d.id, pluginName: d.pluginName, outcome: d.outcome, status: d.responseStatus, error: d.error } },
        createdAt: d.createdAt,
      });
    }
  }

  return {
    async insert(d, tx) {
      if (tx !== undefined) return insertWithEvent(d, tx);
      if (!FAILED_RUN_OUTCOMES.has(d.outcome)) return insertRow(d, db);
      await db.transaction().execute((t) => insertWithEvent(d, t));
    },

    async list(storeId, { limit, after, pluginName }) {
      let q = db
        .selectFrom("deliveries")
        .select(["id", "plugin_name", "plugin_version", "replay_of", "outcome", "invoice_id", "transition", "response_status", "duration_ms", "created_at"])
        .where("store_id", "=", storeId);
      if (pluginName !== undefined) q = q.where("plugin_name", "=", pluginName);
      if (after !== null) q = q.where((eb) => eb(eb.refTuple("created_at", "id"), "<", eb.tuple(after.createdAt, after.id)));
      const rows = await q.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit + 1).execute();
      const { page, next } = takePage(rows, limit);
      return { deliveries: page.map(summary), next };
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
      const r = await db.selectFrom("deliveries").select(["plugin_name", "method", "headers", "query", "body"]).where("store_id", "=", storeId).where("id", "=", id).executeTakeFirst();
      if (!r) return null;
      return {
        pluginName: r.plugin_name,
        method: r.method,
        headers: JSON.parse(r.headers) as Record<string, string>,
        query: JSON.parse(r.query) as Record<string, string>,
        body: Buffer.from(r.body),
      };
    },

    async pruneOlderThan(cutoffMs) {
      const res = await db.deleteFrom("deliveries").where("created_at", "<", cutoffMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
