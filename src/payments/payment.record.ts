// Step 5 of a payment: the delivery record, the one trace of every delivery (its request, the plugin's
// result, logs and fetches, and the answer given), written with the decision it records. A plugin run that
// failed (errored, timed out, returned nonsense) is also a `delivery.failed` event for the merchant's
// systems, in the same transaction; a rejection is not (it is the plugin doing its job).
import { performance } from "node:perf_hooks";
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { appendEvent } from "../events/events.repository.ts";
import type { DeliveriesRepository, DeliveryOutcome, DeliveryRecord } from "./deliveries.repository.ts";
import { storableText } from "../lib/input-guard.ts";
import { type Redact, scrubValue } from "./redaction.ts";
import type { WebhookInput } from "./webhook.service.ts";

/** Bodies of deliveries nobody verified are kept up to this many bytes by default. */
export const DEFAULT_UNVERIFIED_BODY_BYTES = 4096;

export type RecordFields = Pick<DeliveryRecord, "outcome" | "result" | "error" | "logs" | "fetches" | "invoiceId" | "transition" | "responseStatus" | "responseBody">;

export const NOTHING_RAN: Pick<RecordFields, "result" | "error" | "logs" | "fetches" | "invoiceId" | "transition"> = { result: null, error: null, logs: [], fetches: [], invoiceId: null, transition: null };

/** One delivery in progress: its id and its clock. */
export interface DeliveryContext {
  id: string;
  input: WebhookInput;
  receivedAt: number;
  startedAt: number;
  /** The provider's event as its body names it (eventOfBody), read once the plugin has run. */
  bodyEvent?: BodyEvent;
}

export interface BodyEvent {
  id: string | null;
  type: string | null;
}

/** Bodies larger than this are not parsed for their event: the money path stays lean on huge bodies. */
const EVENT_BODY_MAX_BYTES = 256 * 1024;

const text = (v: unknown) => (typeof v === "string" && v !== "" ? storableText(v.slice(0, 200)) : null);

/**
 * The provider's event id and type as the JSON body names them, for the delivery log's columns: the top-level
 * `type` (Stripe, Standard Webhooks), else `event_type` (PayPal), else `event.type` (Coinbase Commerce); the
 * id likewise from `id` or `event.id`. The plugin's own eventId, when it returns one, wins over the body's.
 */
export function eventOfBody(body: Buffer): BodyEvent {
  if (body.length === 0 || body.length > EVENT_BODY_MAX_BYTES || body[0] !== 0x7b) return { id: null, type: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return { id: null, type: null };
  }
  if (parsed === null || typeof parsed !== "object") return { id: null, type: null };
  const o = parsed as Record<string, unknown>;
  const inner = o.event !== null && typeof o.event === "object" ? (o.event as Record<string, unknown>) : {};
  return { id: text(o.id) ?? text(inner.id), type: text(o.type) ?? text(o.event_type) ?? text(inner.type) };
}

export interface RecordOptions {
  pluginVersion?: number | null;
  redact?: Redact;
  /** Nobody vouched for an unverified body (unknown or disabled plugin, rejected): only its start is kept. */
  verified?: boolean;
  unverifiedBodyBytes: number;
}

export function deliveryRecord(d: DeliveryContext, fields: RecordFields, options: RecordOptions): DeliveryRecord {
  const { input } = d;
  const redact = options.redact ?? ((t: string) => t);
  return {
    id: d.id,
    storeId: input.storeId,
    pluginName: input.pluginName,
    pluginVersion: options.pluginVersion ?? null,
    replayOf: input.replayOf ?? null,
    method: input.method,
    headers: input.headers,
    query: input.query,
    body: options.verified === false ? input.body.subarray(0, options.unverifiedBodyBytes) : input.body,
    bodyBytes: input.body.length,
    createdAt: d.receivedAt,
    durationMs: performance.now() - d.startedAt,
    eventId: resultEventId(fields.result) ?? d.bodyEvent?.id ?? null,
    eventType: d.bodyEvent?.type ?? null,
    ...fields,
    invoiceId: fields.invoiceId === null ? null : storableText(fields.invoiceId),
    result: scrubValue(fields.result, redact),
    responseBody: scrubValue(fields.responseBody, redact),
  };
}

function resultEventId(result: unknown): string | null {
  const id = result !== null && typeof result === "object" ? (result as { eventId?: unknown }).eventId : undefined;
  return typeof id === "string" && id !== "" ? storableText(id) : null;
}

/** Outcomes that are a broken plugin run, so the merchant hears of them; rejections are not. */
const FAILED_RUN_OUTCOMES: ReadonlySet<DeliveryOutcome> = new Set(["plugin_error", "plugin_timeout"]);

/** Records a delivery; a failed run with its `delivery.failed` event, in one transaction. */
export async function recordDelivery(db: Kysely<Database>, deliveries: DeliveriesRepository, record: DeliveryRecord): Promise<void> {
  if (!FAILED_RUN_OUTCOMES.has(record.outcome)) return deliveries.insert(record);
  await db.transaction().execute(async (tx: Transaction<Database>) => {
    await deliveries.insert(record, tx);
    await appendEvent(tx, {
      storeId: record.storeId,
      type: "delivery.failed",
      data: { delivery: { id: record.id, pluginName: record.pluginName, outcome: record.outcome, status: record.responseStatus, error: record.error } },
      createdAt: record.createdAt,
    });
  });
}
