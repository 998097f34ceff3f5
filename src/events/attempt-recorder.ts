// The record of a delivery attempt: the attempt row, the delivery's next state (done, retry at the
// schedule's next step, given up) and the endpoint's health (last success; disabled on 410 or after days
// without success). Successes are written in groups, failures one by one (they are rare and may disable).
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import type { Dialect } from "../platform/db/database.ts";
import { newId } from "../lib/ids.ts";
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
  const { db, dialect, now } = deps;
  const opts = { schedule: deps.schedule, disableAfterFailingMs: deps.disableAfterFailingMs };

  async function record(task: AttemptedTask, result: SendResult): Promise<void> {
    const outcome = attemptOutcome(result, task.attempts + 1, opts.schedule.length);
    if (outcome === "succeeded" && result.ok) return recordSuccess({ task, status: result.status, excerpt: result.excerpt, headers: result.headers, durationMs: result.durationMs });
    return recordFailure(task, result, outcome);
  }

  // Successes are written in groups: while one group's transaction runs, the next group gathers, so a busy
  // endpoint costs one transaction per group instead of one per event.
  interface Success {
    task: AttemptedTask;
    status: number;
    excerpt: string;
    headers: Record<string, string>;
    durationMs: number;
  }
  let gathering: { items: Success[]; done: Promise<void> } | null = null;
  let writing: Promise<void> = Promise.resolve();

  function recordSuccess(item: Success): Promise<void> {
    if (gathering === null) {
      const group: { items: Success[]; done: Promise<void> } = { items: [], done: Promise.resolve() };
      // A few milliseconds of gathering turn a stream of answers into one commit per group.
      group.done = Promise.all([writing, new Promise((resolve) => setTimeout(resolve, GROUP_GATHER_MS))]).then(() => {
        if (gathering === group) gathering = null;
        return writeSuccesses(group.items);
      });
      writing = group.done.catch(() => {});
      gathering = group;
    }
    gathering.items.push(item);
    return gathering.done;
  }

  async function writeSuccesses(items: Success[]): Promise<void> {
    const t = now();
    const endpoints = [...new Set(items.map((i) => i.task.endpoint_id))].sort();
    await db.transaction().execute(async (tx) => {
      // Endpoint rows first, in one order (see recordFailure), and only when it changes something: a
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
            id: newId("att"),
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

  async function recordFailure(task: AttemptedTask, result: SendResult, outcome: AttemptOutcome): Promise<void> {
    const t = now();
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
          id: newId("att"),
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
      const next = outcome === "failed" ? t + opts.schedule[number - 1]! : t;
      await tx
        .updateTable("event_deliveries")
        .set({ status: outcome === "failed" ? "pending" : "failed", attempts: number, next_attempt_at: next, claim_token: null, updated_at: t })
        .where("id", "=", task.id)
        // Only while the claim is still ours: past its lease another process may own the task.
        .where("claim_token", "=", task.claim_token)
        .execute();
      let disable: string | null = outcome === "gone" ? "the endpoint answered 410 Gone" : null;
      if (disable === null) {
        await tx.updateTable("event_endpoints").set({ failing_since: t }).where("id", "=", task.endpoint_id).where("failing_since", "is", null).execute();
        const ep = await tx.selectFrom("event_endpoints").select("failing_since").where("id", "=", task.endpoint_id).executeTakeFirst();
        if (ep?.failing_since != null && t - Number(ep.failing_since) >= opts.disableAfterFailingMs) disable = `no successful delivery for ${Math.round(opts.disableAfterFailingMs / 86_400_000)} days`;
      }
      if (disable !== null) {
        await tx.updateTable("event_endpoints").set({ enabled: 0, disabled_reason: disable, updated_at: t }).where("id", "=", task.endpoint_id).execute();
        await tx.updateTable("event_deliveries").set({ status: "cancelled", updated_at: t }).where("endpoint_id", "=", task.endpoint_id).where("status", "=", "pending").execute();
      }
    });
  }

  return { record };
}
