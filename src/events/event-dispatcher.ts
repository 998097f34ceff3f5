// The dispatcher: a loop owned by `serve` that sends queued events to their endpoints. Each unit of work
// (one event for one endpoint) is claimed from the database by pushing its due time one lease ahead
// (on PostgreSQL with FOR UPDATE SKIP LOCKED), so any number of processes share the work, each attempt
// is made by one of them, and a killed process's claim simply falls due again when its lease ends.
// Sending is plain async I/O beside the request handlers: payments never wait on it, and a cap per
// endpoint keeps one slow receiver from taking every slot.
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { sql, type Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import type { Dialect } from "../platform/db/database.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { type AttemptedTask, type AttemptOutcome, attemptOutcome, createAttemptRecorder } from "./attempt-recorder.ts";
import type { EndpointSender, SendResult } from "./endpoint-target.ts";
import { renderEventJson } from "./event-render.ts";
import { onDeliveriesQueued } from "./events.repository.ts";
import { CURRENT_API_VERSION } from "./events.types.ts";
import { versionForStored } from "../versioning/registry.ts";
import { openEndpointSecrets } from "./events.service.ts";
import { signingSecrets, webhookHeaders } from "./webhook-signing.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** docs/events.md, "Retries": the waits before each retry; after the last one the series has failed. */
export const RETRY_SCHEDULE_MS: readonly number[] = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
export const DELIVERY_TIMEOUT_MS = 15 * SECOND;
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * HOUR;
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
  /** Told of every attempt's result (metrics, the log), with the event's creation time and what it was. */
  onAttempt?: (result: SendResult, eventCreatedAt: number, attempt: AttemptReport) => void;
}

/** Which attempt an `onAttempt` call is about, and what follows it. */
export interface AttemptReport {
  storeId: string;
  endpointId: string;
  deliveryId: string;
  eventId: string;
  /** 1 for the first try. */
  attempt: number;
  outcome: AttemptOutcome;
}

export interface Dispatcher {
  /** Starts the loop; errors it survives (a database outage) go to `onError`. */
  start(onError?: (err: unknown) => void): void;
  /** Stops claiming and waits for the attempts in flight. */
  stop(): Promise<void>;
  /** Sends everything due now, waiting for the answers; repeats until nothing is due. Returns the attempts made; throws what failed. */
  runDue(): Promise<number>;
  /** Wall-clock milliseconds at which a look for due work last succeeded (claimed, or found nothing); null before. */
  lastSuccessAt(): number | null;
}

/** A claimed delivery with what sending it needs: its event and its endpoint (p_*), read in the claim. */
interface ClaimedTask extends AttemptedTask {
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

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const { db, dialect, box, sender, now } = deps;
  const signingNow = deps.signingNow ?? Date.now;
  const opts: DispatcherOptions = { ...DEFAULT_DISPATCHER_OPTIONS, ...deps.options };
  let report = deps.onError ?? ((err: unknown) => process.emitWarning(`event dispatcher: ${err instanceof Error ? err.message : String(err)}`));
  // While the database is unreachable every poll fails the same way: say so once a minute, not four times a second.
  let lastReported = { message: "", at: -Infinity };
  const onError = (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    const at = performance.now();
    if (message === lastReported.message && at - lastReported.at < 60_000) return;
    lastReported = { message, at };
    report(err);
  };

  const recorder = createAttemptRecorder({ db, dialect, now, schedule: opts.schedule, disableAfterFailingMs: opts.disableAfterFailingMs });
  const inFlight = new Map<string, number>(); // endpoint id -> attempts in flight
  const running = new Set<Promise<void>>();
  let total = 0;
  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let ticking: Promise<void> | null = null;
  let again = false;
  let unsubscribe: (() => void) | null = null;
  let lastSuccess: number | null = null;

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
    const valid = signingSecrets(openSecrets(task.p_secrets), task.p_previous_expires === null ? null : Number(task.p_previous_expires), now());
    const body = renderEventJson({ id: task.event_id, type: task.e_type, data: task.e_data!, createdAt: Number(task.e_created_at) }, task.p_api_version ?? CURRENT_API_VERSION);
    // The receiver learns which shape it got, as an API client does from the response header.
    const headers = { ...webhookHeaders(valid, task.event_id, Math.floor(signingNow() / 1000), body), "storefront-version": versionForStored(task.p_api_version ?? CURRENT_API_VERSION).version };
    const result = await sender.send(task.p_url, headers, body);
    sent();
    const attempt = task.attempts + 1;
    const outcome = attemptOutcome(result, attempt, opts.schedule.length);
    deps.onAttempt?.(result, Number(task.e_created_at), { storeId: task.store_id, endpointId: task.endpoint_id, deliveryId: task.id, eventId: task.event_id, attempt, outcome });
    await recorder.record(task, result);
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
      .then(() => {
        lastSuccess = Date.now();
      })
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
      if (errorHandler) report = errorHandler;
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
    lastSuccessAt: () => lastSuccess,
  };
}
