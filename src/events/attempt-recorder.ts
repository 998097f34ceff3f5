// The record of a delivery attempt: the attempt row, the delivery's next state (done, retry at the
// schedule's next step, given up) and the endpoint's health (last success; disabled on 410 or after days
// without success). Successes are written in groups, failures one by one (they are rare and may disable).
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import type { Dialect } from "../platform/db/database.ts";
import { newTimedId } from "../lib/ids.ts";
import type { SendResult } from "./endpoint-target.ts";

/** Answers recorded together: the record is not on the way to the receiver, so this costs no latency. */
const GROUP_GATHER_MS = 25;

export type AttemptOutcome = "succeeded" | "failed" | "exhausted" | "gone";

/** What an attempt's result means for its delivery: done, retried, given up (the last retry), or 410. */
export function attemptOutcome(result: SendResult, attemptNumber: number, retries: number): AttemptOutcome {
  const status = result.ok ? result.status : null;
  if (status !== null && status >= 200 && status < 300) return "succeeded";
  return status === 410 ? "gone" : attemptNumber > retries ? "exhausted" : "failed";
}

/** The claimed delivery an attempt was made for. */
export interface AttemptedTask {
  id: string;
  store_id: string;
  claim_token: string | null;
  event_id: string;
  endpoint_id: string;
  /** Attempts made before this one. */
  attempts: number;
}

export interface AttemptRecorderDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  now: () => number;
  schedule: readonly number[];
  disableAfterFailingMs: number;
}

export interface AttemptRecorder {
  record(task: AttemptedTask, result: SendResult): Promise<void>;
}

export function createAttemptRecorder(deps: AttemptRecorderDeps): AttemptRecorder {
  const recordSuccess = successGroups((items) => writeSuccesses(deps, items));
  async function record(task: AttemptedTask, result: SendResult): Promise<void> {
    const outcome = attemptOutcome(result, task.attempts + 1, deps.schedule.length);
    if (outcome === "succeeded" && result.ok) return recordSuccess({ task, status: result.status, excerpt: result.excerpt, headers: result.headers, durationMs: result.durationMs });
    return writeFailure(deps, task, result, outcome);
  }
  return { record };
}

interface Success {
  task: AttemptedTask;
  status: number;
  excerpt: string;
  headers: Record<string, string>;
  durationMs: number;
}

/**
 * Successes are written in groups: while one group's transaction runs, the next group gathers, so a busy
 * endpoint costs one transaction per group instead of one per event. Each caller waits for its group's write.
 */
function successGroups(write: (items: Success[]) => Promise<void>): (item: Success) => Promise<void> {
  let gathering: { items: Success[]; done: Promise<void> } | null = null;
  let writing: Promise<void> = Promise.resolve();
  return (item) => {
    if (gathering === null) {
      const group: { items: Success[]; done: Promise<void> } = { items: [], done: Promise.resolve() };
      // A few milliseconds of gathering turn a stream of answers into one commit per group.
      group.done = Promise.all([writing, new Promise((resolve) => setTimeout(resolve, GROUP_GATHER_MS))]).then(() => {
        if (gathering === group) gathering = null;
        return write(group.items);
      });
      writing = group.done.catch(() => {});
      gathering = group;
    }
    gathering.items.push(item);
    return gathering.done;
  };
}

async function writeSuccesses({ db, now }: AttemptRecorderDeps, items: Success[]): Promise<void> {
  const t = now();
  const endpoints = [...new Set(items.map((i) => i.task.endpoint_id))].sort();
  await db.transaction().execute(async (tx) => {
    // Endpoint rows first, in one order (see writeFailure), and only when it changes something: a
    // healthy endpoint's row is not rewritten on every event.
    for (const endpointId of endpoints) {
      await tx
        .updateTable("event_endpoints")
        .set({ last_success_at: t, failing_since: null })
        .where("id", "=", endpointId)
        .where((eb) => eb.or([eb("failing_since", "is not", null), eb("last_success_at", "is", null), eb("last_success_at", "<", t - 60_000)]))
        .execute();
    }
    await tx
      .insertInto("event_attempts")
      .values(
        items.map((i) => ({
          id: newTimedId("att"),
          store_id: i.task.store_id,
          delivery_id: i.task.id,
          event_id: i.task.event_id,
          endpoint_id: i.task.endpoint_id,
          attempt: i.task.attempts + 1,
          outcome: "succeeded",
          response_status: i.status,
          error: null,
          response_excerpt: i.excerpt,
          response_headers: JSON.stringify(i.headers),
          duration_ms: i.durationMs,
          created_at: t,
        })),
      )
      .execute();
    await tx
      .updateTable("event_deliveries")
      .set((eb) => ({ status: "succeeded", attempts: eb("attempts", "+", 1), claim_token: null, updated_at: t }))
      .where(
        "id",
        "in",
        items.map((i) => i.task.id),
      )
      // Only rows whose claim is still ours: past its lease another process may own one.
      .where("claim_token", "in", [...new Set(items.map((i) => i.task.claim_token!))])
      .execute();
  });
}

async function writeFailure(deps: AttemptRecorderDeps, task: AttemptedTask, result: SendResult, outcome: AttemptOutcome): Promise<void> {
  const { db, dialect, schedule } = deps;
  const t = deps.now();
  const number = task.attempts + 1;
  const status = result.ok ? result.status : null;
  await db.transaction().execute(async (tx) => {
    if (dialect === "postgres") {
      // The endpoint's row first: attempts to one endpoint finishing together then queue here instead of
      // locking each other's deliveries in opposite orders (when one of them disables the endpoint).
      await tx.selectFrom("event_endpoints").select("id").where("id", "=", task.endpoint_id).forUpdate().execute();
    }
    await tx
      .insertInto("event_attempts")
      .values({
        id: newTimedId("att"),
        store_id: task.store_id,
        delivery_id: task.id,
        event_id: task.event_id,
        endpoint_id: task.endpoint_id,
        attempt: number,
        outcome,
        response_status: status,
        error: result.ok ? null : result.error,
        response_excerpt: result.ok ? result.excerpt : "",
        response_headers: JSON.stringify(result.ok ? result.headers : {}),
        duration_ms: result.durationMs,
        created_at: t,
      })
      .execute();
    const next = outcome === "failed" ? t + schedule[number - 1]! : t;
    await tx
      .updateTable("event_deliveries")
      .set({ status: outcome === "failed" ? "pending" : "failed", attempts: number, next_attempt_at: next, claim_token: null, updated_at: t })
      .where("id", "=", task.id)
      // Only while the claim is still ours: past its lease another process may own the task.
      .where("claim_token", "=", task.claim_token)
      .execute();
    const disable = outcome === "gone" ? "the endpoint answered 410 Gone" : await failingTooLong(tx, task.endpoint_id, t, deps.disableAfterFailingMs);
    if (disable !== null) {
      await tx.updateTable("event_endpoints").set({ enabled: 0, disabled_reason: disable, updated_at: t }).where("id", "=", task.endpoint_id).execute();
      await tx.updateTable("event_deliveries").set({ status: "cancelled", updated_at: t }).where("endpoint_id", "=", task.endpoint_id).where("status", "=", "pending").execute();
    }
  });
}

/** Notes when the endpoint started failing; the reason to disable it once that was long enough ago, else null. */
async function failingTooLong(tx: Transaction<Database>, endpointId: string, t: number, disableAfterFailingMs: number): Promise<string | null> {
  await tx.updateTable("event_endpoints").set({ failing_since: t }).where("id", "=", endpointId).where("failing_since", "is", null).execute();
  const ep = await tx.selectFrom("event_endpoints").select("failing_since").where("id", "=", endpointId).executeTakeFirst();
  if (ep?.failing_since != null && t - Number(ep.failing_since) >= disableAfterFailingMs) return `no successful delivery for ${Math.round(disableAfterFailingMs / 86_400_000)} days`;
  return null;
}
