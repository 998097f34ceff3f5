// Step 5 of a payment: the delivery record, the one trace of every delivery (its request, the plugin's
// result, logs and fetches, and the answer given), written with the decision it records. A plugin run that
// failed (errored, timed out, returned nonsense) is also a `delivery.failed` event for the merchant's
// systems, in the same transaction; a rejection is not (it is the plugin doing its job).
import { performance } from "node:perf_hooks";
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { appendEvent } from "../events/events.repository.ts";
import type { DeliveriesRepository, DeliveryOutcome, DeliveryRecord } from "./deliveries.repository.ts";
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
    ...fields,
    result: scrubValue(fields.result, redact),
    responseBody: scrubValue(fields.responseBody, redact),
  };
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
