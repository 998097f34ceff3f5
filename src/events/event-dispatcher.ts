// The dispatcher: a loop owned by `serve` that sends queued events to their endpoints. Each unit of work
// (one event for one endpoint) is claimed from the database by pushing its due time one lease ahead
// (on PostgreSQL with FOR UPDATE SKIP LOCKED), so any number of processes share the work, each attempt
// is made by one of them, and a killed process's claim simply falls due again when its lease ends.
// Sending is plain async I/O beside the request handlers: payments never wait on it, and a cap per
// endpoint keeps one slow receiver from taking every slot.
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { sql, type Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Dialect } from "../db/database.ts";
import { newId } from "../lib/ids.ts";
import type { SecretBox } from "../plugins/secrets.ts";
import type { EndpointSender, SendResult } from "./endpoint-target.ts";
import { renderEventJson } from "./event-render.ts";
import { onDeliveriesQueued } from "./events.repository.ts";
import { CURRENT_API_VERSION } from "./events.types.ts";
import { openEndpointSecrets } from "./events.service.ts";
import { webhookHeaders } from "./webhook-signing.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** CONTRACT §9: the waits before each retry; after the last one the series has failed. */
export const RETRY_SCHEDULE_MS: readonly number[] = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
export const DELIVERY_TIMEOUT_MS = 15 * SECOND;
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * HOUR;
/** Answers recorded together: the record is not on the way to the receiver, so this costs no latency. */
const GROUP_GATHER_MS = 25;
/** A claim waits this long after answers or new events, so that several share it. */
const CLAIM_GATHER_MS = 10;

export interface DispatcherOptions {
  /** Attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight per endpoint in this process. */
  perEndpoint: number;
  schedule: readonly number[];
  /** How long a claim holds: longer than an attempt can take. */
  leaseMs: number;
  pollMs: number;
  disableAfterFailingMs: number;
}

export const DEFAULT_DISPATCHER_OPTIONS: DispatcherOptions = {
  concurrency: 32,
  perEndpoint: 16,
  schedule: RETRY_SCHEDULE_MS,
  leaseMs: DELIVERY_TIMEOUT_MS + 30 * SECOND,
  pollMs: 250,
  disableAfterFailingMs: DISABLE_AFTER_FAILING_MS,
};

export interface DispatcherDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  box: SecretBox;
  sender: EndpointSender;
  /** Scheduling time (injectable in tests). */
  now: () => number;
  /** Time written into `webhook-timestamp`: the wall clock, which the receiver compares with its own. */
  signingNow?: () => number;
  options?: Partial<DispatcherOptions>;
  onError?: (err: unknown) => void;
}

export interface Dispatcher {
  /** Starts the loop; errors it survives (a database outage) go to `onError`. */
  start(onError?: (err: unknown) => void): void;
  /** Stops claiming and waits for the attempts in flight. */
  stop(): Promise<void>;
  /** Sends everything due now, waiting for the answers; repeats until nothing is due. Returns the attempts made; throws what failed. */
  runDue(): Promise<number>;
}

interface ClaimedTask {
  id: string;
  store_id: string;
  claim_token: string | null;
  event_id: string;
  endpoint_id: string;
  attempts: number;
  manual: number;
  e_type: string | null;
  e_data: string | null;
  e_created_at: number | null;
  p_url: string | null;
  p_enabled: number | null;
  p_secrets: string | null;
  p_previous_expires: number | null;
  p_api_version: string | null;
}

type AttemptOutcome = "succeeded" | "failed" | "exhausted" | "gone";

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const { db, dialect, box, sender, now } = deps;
  const signingNow = deps.signingNow ?? Date.now;
  const opts: DispatcherOptions = { ...DEFAULT_DISPATCHER_OPTIONS, ...deps.options };
  let onError = deps.onError ?? ((err: unknown) => process.emitWarning(`event dispatcher: ${err instanceof Error ? err.message : String(err)}`));

  const inFlight = new Map<string, number>(); // endpoint id -> attempts in flight
  const running = new Set<Promise<void>>();
  let total = 0;
  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let ticking: Promise<void> | null = null;
  let again = false;
  let unsubscribe: (() => void) | null = null;

  /** The last claim filled every slot it asked for: more is probably due, so claim without reading first. */
  let busy = false;
  async function claim(limit: number): Promise<ClaimedTask[]> {
    const t = now();
    const token = randomUUID();
    const saturated = [...inFlight].filter(([, n]) => n >= opts.perEndpoint).map(([id]) => id);
    let due = db
      .selectFrom("event_deliveries")
      .select("id")
      // A literal, not a parameter: SQLite uses the partial index only for a condition it can see.
      .where("status", "=", sql.lit("pending"))
      .where("next_attempt_at", "<=", t)
      .orderBy("next_attempt_at")
      .limit(limit);
    if (saturated.length > 0) due = due.where("endpoint_id", "not in", saturated);
    // Unless busy, a read first: a poll that finds nothing then costs one read, never a write (or a lock).
    if (!busy && (await due.executeTakeFirst()) === undefined) return [];
    if (dialect === "postgres") due = due.forUpdate().skipLocked();
    const claimed = await db
      .updateTable("event_deliveries")
      .set({ next_attempt_at: t + opts.leaseMs, claim_token: token })
      .where("id", "in", due)
      .returning("id")
      .execute();
    busy = claimed.length === limit;
    if (claimed.length === 0) return [];
    return db
      .selectFrom("event_deliveries as d")
      .leftJoin("events as e", "e.id", "d.event_id")
      .leftJoin("event_endpoints as p", "p.id", "d.endpoint_id")
      .select([
        "d.id",
        "d.store_id",
        "d.claim_token",
        "d.event_id",
        "d.endpoint_id",
        "d.attempts",
        "d.manual",
        "e.type as e_type",
        "e.data as e_data",
        "e.created_at as e_created_at",
        "p.url as p_url",
        "p.enabled as p_enabled",
        "p.secrets as p_secrets",
        "p.previous_secret_expires_at as p_previous_expires",
        "p.api_version as p_api_version",
      ])
      .where(
        "d.id",
        "in",
        claimed.map((c) => c.id),
      )
      .where("d.claim_token", "=", token)
      .execute() as Promise<ClaimedTask[]>;
  }

  // Opening a sealed secret is an AES-GCM decryption; an endpoint's secrets change only on rotation.
  const opened = new Map<string, ReturnType<typeof openEndpointSecrets>>();
  function openSecrets(sealed: string) {
    let secrets = opened.get(sealed);
    if (secrets === undefined) {
      if (opened.size >= 1000) opened.clear();
      secrets = openEndpointSecrets(box, sealed);
      opened.set(sealed, secrets);
    }
    return secrets;
  }

  /** `sent` frees the attempt's slot once the endpoint has answered; the record follows in its group. */
  async function attempt(task: ClaimedTask, sent: () => void): Promise<void> {
    if (task.e_type === null || task.p_url === null || task.p_enabled !== 1 || task.p_secrets === null) {
      // The event was pruned or the endpoint removed or disabled since: nothing to send.
      await db.updateTable("event_deliveries").set({ status: "cancelled", claim_token: null, updated_at: now() }).where("id", "=", task.id).where("claim_token", "=", task.claim_token).execute();
      return;
    }
    const secrets = openSecrets(task.p_secrets);
    const valid = [secrets.current];
    if (secrets.previous !== undefined && task.p_previous_expires !== null && task.p_previous_expires > now()) valid.push(secrets.previous);
    const body = renderEventJson({ id: task.event_id, type: task.e_type, data: task.e_data!, createdAt: Number(task.e_created_at) }, task.p_api_version ?? CURRENT_API_VERSION);
    const result = await sender.send(task.p_url, webhookHeaders(valid, task.event_id, Math.floor(signingNow() / 1000), body), body);
    sent();
    await record(task, result);
  }

  async function record(task: ClaimedTask, result: SendResult): Promise<void> {
    const number = task.attempts + 1;
    const status = result.ok ? result.status : null;
    if (status !== null && status >= 200 && status < 300) return recordSuccess({ task, status, excerpt: result.ok ? result.excerpt : "", durationMs: result.durationMs });
    const outcome: AttemptOutcome = status === 410 ? "gone" : number > opts.schedule.length ? "exhausted" : "failed";
    return recordFailure(task, result, outcome);
  }

  // Successes are written in groups: while one group's transaction runs, the next group gathers, so a busy
  // endpoint costs one transaction per group instead of one per event.
  interface Success {
    task: ClaimedTask;
    status: number;
    excerpt: string;
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

  async function recordFailure(task: ClaimedTask, result: SendResult, outcome: AttemptOutcome): Promise<void> {
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
        if (ep?.failing_since != null && t - Number(ep.failing_since) >= opts.disableAfterFailingMs) disable = "no successful delivery for 5 days";
      }
      if (disable !== null) {
        await tx.updateTable("event_endpoints").set({ enabled: 0, disabled_reason: disable, updated_at: t }).where("id", "=", task.endpoint_id).execute();
        await tx.updateTable("event_deliveries").set({ status: "cancelled", updated_at: t }).where("endpoint_id", "=", task.endpoint_id).where("status", "=", "pending").execute();
      }
    });
  }

  function launch(task: ClaimedTask, errors?: unknown[]): Promise<void> {
    inFlight.set(task.endpoint_id, (inFlight.get(task.endpoint_id) ?? 0) + 1);
    total++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = (inFlight.get(task.endpoint_id) ?? 1) - 1;
      if (n === 0) inFlight.delete(task.endpoint_id);
      else inFlight.set(task.endpoint_id, n);
      total--;
      // A few milliseconds later: answers arriving together then share one claim.
      if (started && !stopped) wake(CLAIM_GATHER_MS);
    };
    const p = attempt(task, release)
      .catch((err: unknown) => {
        if (errors) errors.push(err);
        else onError(err);
      })
      .finally(() => {
        release();
        running.delete(p);
      });
    running.add(p);
    return p;
  }

  function tick(): Promise<void> {
    if (ticking !== null) {
      again = true;
      return ticking;
    }
    const run = async () => {
      do {
        again = false;
        while (!stopped && total < opts.concurrency) {
          const batch = await claim(opts.concurrency - total);
          if (batch.length === 0) break;
          for (const task of batch) void launch(task);
        }
      } while (again && !stopped);
    };
    // Reactions run asynchronously: `ticking` is cleared only after it was set, even when run() did no I/O.
    ticking = run()
      .catch(onError)
      .finally(() => {
        ticking = null;
      });
    return ticking;
  }

  let timerAt = Infinity;
  /** Until then, an event was queued in this process recently: look often, its commit is imminent. */
  let eagerUntil = 0;

  function wake(delayMs: number): void {
    if (stopped || !started) return;
    const at = performance.now() + delayMs;
    if (timer !== null && timerAt <= at) return; // an earlier look is already planned
    if (timer !== null) clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(() => {
      timer = null;
      timerAt = Infinity;
      void tick().finally(() => wake(performance.now() < eagerUntil ? 10 : opts.pollMs));
    }, delayMs);
    timer.unref();
  }

  return {
    start(errorHandler) {
      if (started) return;
      if (errorHandler) onError = errorHandler;
      started = true;
      // An event written in this process is looked for just after its transaction commits.
      unsubscribe = onDeliveriesQueued((endpointIds) => {
        // For an endpoint already at its cap, the next answer from it wakes the loop anyway.
        if (endpointIds.every((id) => (inFlight.get(id) ?? 0) >= opts.perEndpoint)) return;
        eagerUntil = performance.now() + 100;
        // Just after the writing transaction commits; events queued together share the claim.
        wake(CLAIM_GATHER_MS);
      });
      wake(0);
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      if (timer !== null) clearTimeout(timer);
      // A claim under way finishes (its tasks are launched and awaited below) before the database closes.
      await ticking;
      await Promise.allSettled([...running]);
    },
    async runDue() {
      let made = 0;
      for (;;) {
        const batch = await claim(opts.concurrency);
        if (batch.length === 0) return made;
        made += batch.length;
        const errors: unknown[] = [];
        await Promise.all(batch.map((task) => launch(task, errors)));
        if (errors.length > 0) throw errors[0];
      }
    },
  };
}
