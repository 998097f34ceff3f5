// Prometheus metrics: one registry per service instance (tests build several). Every metric the service
// exports is defined here, with labels whose values come from closed sets (route templates, status codes,
// outcome kinds): never store ids, invoice ids or plugin names, so the number of series stays bounded
// however many stores there are. docs/operations.md lists them with the questions they answer.
import type pg from "pg";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
/** Outbound deliveries still to be sent, by state, and when the oldest of them was queued (the events module counts them). */
export interface OutboundBacklog {
  /** Due now, waiting for a slot or the next look. */
  due: number;
  /** Failed before, waiting for their retry time. */
  retrying: number;
  /** Claimed by a process, an attempt under way. */
  inFlight: number;
  oldestCreatedAt: number | null;
}

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route">;
  /** Plugin runs (deliveries, replays and simulations) by outcome: the result's status or the error kind. */
  pluginRuns: Counter<"outcome">;
  pluginRunDuration: Histogram<"outcome">;
  /** Time a run waited for a sandbox worker before it started. */
  sandboxQueueWait: Histogram;
  /** Webhook responses (POST /api/paymentPlugins) by HTTP status, rate-limited and invalid requests included. */
  webhookResponses: Counter<"status">;
  /** Outbound webhook attempts by result: succeeded (2xx), rejected (another status), no_answer (timeout, network, refused address). */
  eventAttempts: Counter<"result">;
  /** From an event's commit to its delivery to an endpoint (first 2xx): how far behind the merchant's systems are. */
  eventDeliveryLag: Histogram;
  /** A list page's time by stage (src/readmodel/readers.service.ts, PageStage): where a slow read waited. */
  readPageSeconds: Histogram<"stage">;
  /** Reports a background loop's last successful pass (storefront_loop_last_success_timestamp_seconds). */
  trackLoop(loop: LoopName, lastSuccessAt: () => number | null): void;
}

/** The background loops `serve` runs, each in every process (each pass claims its work in the database). */
export type LoopName = "invoice_expiry" | "event_dispatcher" | "readmodel_projector" | "event_sequencer";

export interface MetricSources {
  /** The PostgreSQL pool, whose connections are reported; null on SQLite (one synchronous connection, no pool). */
  pgPool?: pg.Pool | null;
  dialect?: "sqlite" | "postgres";
  /** What runs: the release and the schema version (the last migration this build applies). */
  build?: { release: string; schema: string };
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

export function createMetrics(sources: MetricSources = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  // In this order: /metrics lists them in the order they are made.
  const trackLoop = deploymentGauges(registry, sources.build);
  databaseGauges(registers, sources);
  return { registry, ...httpMetrics(registers), ...readMetrics(registers), ...pluginMetrics(registers), ...eventMetrics(registers), trackLoop };
}

/** The database in use and, on PostgreSQL, its pool's connections, read at each scrape. */
function databaseGauges(registers: Registry[], sources: MetricSources): void {
  if (sources.dialect !== undefined) {
    new Gauge({ name: "storefront_db_info", help: "The database in use (value 1).", labelNames: ["dialect"], registers }).set({ dialect: sources.dialect }, 1);
  }
  const pool = sources.pgPool;
  if (!pool) return;
  new Gauge({
    name: "storefront_db_pool_connections",
    help: "PostgreSQL pool connections by state: busy (running a query or a transaction) or idle.",
    labelNames: ["state"],
    registers,
    collect() {
      this.set({ state: "busy" }, pool.totalCount - pool.idleCount);
      this.set({ state: "idle" }, pool.idleCount);
    },
  });
  new Gauge({
    name: "storefront_db_pool_waiting",
    help: "Queries waiting for a PostgreSQL pool connection (all busy). Above 0 for long: the pool or the database is the bottleneck.",
    registers,
    collect() {
      this.set(pool.waitingCount);
    },
  });
  new Gauge({ name: "storefront_db_pool_max", help: "Size of the PostgreSQL pool.", registers }).set(pool.options.max);
}

function httpMetrics(registers: Registry[]): Pick<Metrics, "httpRequests" | "httpDuration"> {
  return {
    httpRequests: new Counter({
      name: "storefront_http_requests_total",
      help: "HTTP requests by method, route template and status code.",
      labelNames: ["method", "route", "status"],
      registers,
    }),
    httpDuration: new Histogram({
      name: "storefront_http_request_duration_seconds",
      help: "HTTP request duration by method and route template.",
      labelNames: ["method", "route"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
  };
}

/** The read API's pages, stage by stage. */
function readMetrics(registers: Registry[]): Pick<Metrics, "readPageSeconds"> {
  return {
    readPageSeconds: new Histogram({
      name: "storefront_read_page_seconds",
      help: "A list page's time by stage: held (payments first), queued (for a reader thread), built (queries and JSON), returned (for the main thread to take it back).",
      labelNames: ["stage"],
      buckets: [0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.5, 2],
      registers,
    }),
  };
}

/** Payment webhooks in: the plugin runs that decide them, the wait for a worker, and the answers. */
function pluginMetrics(registers: Registry[]): Pick<Metrics, "pluginRuns" | "pluginRunDuration" | "sandboxQueueWait" | "webhookResponses"> {
  return {
    pluginRuns: new Counter({
      name: "storefront_plugin_runs_total",
      help: "Plugin runs by outcome: pushInvoice, disputeInvoice, ignore, or the error kind (rejected, timeout, script_error, …).",
      labelNames: ["outcome"],
      registers,
    }),
    pluginRunDuration: new Histogram({
      name: "storefront_plugin_run_duration_seconds",
      help: "Time a plugin run took in its worker (host calls included, queue wait excluded), by outcome.",
      labelNames: ["outcome"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    sandboxQueueWait: new Histogram({
      name: "storefront_sandbox_queue_wait_seconds",
      help: "Time a plugin run waited for a sandbox worker before it started.",
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers,
    }),
    webhookResponses: new Counter({
      name: "storefront_webhook_responses_total",
      help: "Webhook responses by HTTP status code (200 applied or ignored, 401 rejected, 404, 409, 429, 5xx plugin failures).",
      labelNames: ["status"],
      registers,
    }),
  };
}

/** Events out: attempts to the merchants' endpoints and how long after the event they succeed. */
function eventMetrics(registers: Registry[]): Pick<Metrics, "eventAttempts" | "eventDeliveryLag"> {
  return {
    eventAttempts: new Counter({
      name: "storefront_event_attempts_total",
      help: "Outbound webhook attempts by result: succeeded (2xx), rejected (any other status), no_answer (timeout, network error, refused address).",
      labelNames: ["result"],
      registers,
    }),
    eventDeliveryLag: new Histogram({
      name: "storefront_event_delivery_lag_seconds",
      help: "Time from an event's commit to its successful delivery to an endpoint (retries included).",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300, 1800, 7200, 36000, 172800],
      registers,
    }),
  };
}

/** What a deployment of several processes asks of each: which build it runs, and whether its loops still succeed. */
function deploymentGauges(registry: Registry, build: MetricSources["build"]): Metrics["trackLoop"] {
  const registers = [registry];
  if (build !== undefined) {
    // Which release each process runs: during a rolling upgrade two values show up side by side.
    new Gauge({ name: "storefront_build_info", help: "The release and schema version this process runs (value 1).", labelNames: ["release", "schema"], registers }).set(build, 1);
  }
  const loops = new Map<LoopName, () => number | null>();
  new Gauge({
    name: "storefront_loop_last_success_timestamp_seconds",
    help: "Unix time of a background loop's last successful pass in this process (0: none yet). Alert when time() minus it grows.",
    labelNames: ["loop"],
    registers,
    collect() {
      for (const [loop, lastSuccessAt] of loops) this.set({ loop }, (lastSuccessAt() ?? 0) / 1000);
    },
  });
  return (loop, lastSuccessAt) => void loops.set(loop, lastSuccessAt);
}

/**
 * What is still to be sent to the merchants' endpoints, every store and process together (so every process
 * reports the same: take one, not the sum), read at each scrape from the pending deliveries' index. Finished
 * deliveries are history, kept EVENT_RETENTION_DAYS, and not counted: that would scan them at every scrape.
 */
export function observeOutboundBacklog(metrics: Metrics, backlog: () => Promise<OutboundBacklog>, now: () => number = Date.now): void {
  let last: Promise<OutboundBacklog> | null = null;
  // Both gauges of one scrape share one reading: a scrape calls every collect() at once, before it settles.
  // Forgotten as soon as it settles (not an event-loop turn later: on SQLite the next scrape may come first).
  const read = () =>
    (last ??= backlog().finally(() => {
      last = null;
    }));
  const registers = [metrics.registry];
  new Gauge({
    name: "storefront_event_backlog",
    help: "Outbound webhook deliveries still to be sent, by state: due (now), retrying (waiting for their retry time), in_flight (an attempt under way).",
    labelNames: ["state"],
    registers,
    async collect() {
      const b = await read().catch(() => ({ due: Number.NaN, retrying: Number.NaN, inFlight: Number.NaN }));
      this.set({ state: "due" }, b.due);
      this.set({ state: "retrying" }, b.retrying);
      this.set({ state: "in_flight" }, b.inFlight);
    },
  });
  new Gauge({
    name: "storefront_event_backlog_oldest_seconds",
    help: "Age of the oldest outbound webhook delivery still to be sent (0 when none).",
    registers,
    async collect() {
      const b = await read().catch(() => ({ oldestCreatedAt: Number.NaN }));
      this.set(b.oldestCreatedAt === null ? 0 : Math.max(0, now() - b.oldestCreatedAt) / 1000);
    },
  });
}

/**
 * How far the read model's documents are behind the writes that made them stale (src/readmodel/projector.ts):
 * the changes waiting to be applied and the age of the oldest one, read at each scrape. The
 * lists never serve a stale document meanwhile; a growing lag means reads assemble more from the sources.
 */
export function observeReadModel(metrics: Metrics, backlog: () => Promise<{ changes: number; oldestAt: number | null }>, now: () => number = Date.now): void {
  let last: Promise<{ changes: number; oldestAt: number | null }> | null = null;
  // Both gauges of one scrape share one reading.
  const read = () => (last ??= backlog().finally(() => setImmediate(() => (last = null))));
  const registers = [metrics.registry];
  new Gauge({
    name: "storefront_readmodel_backlog",
    help: "Changes to read-model documents committed and not yet applied by the projector (a document changed twice counts twice).",
    registers,
    async collect() {
      this.set((await read().catch(() => ({ changes: Number.NaN }))).changes);
    },
  });
  new Gauge({
    name: "storefront_readmodel_lag_seconds",
    help: "Age of the oldest change the projector has not yet applied to the read model's documents (0 when none).",
    registers,
    async collect() {
      const b = await read().catch(() => ({ oldestAt: Number.NaN }));
      this.set(b.oldestAt === null ? 0 : Math.max(0, now() - b.oldestAt) / 1000);
    },
  });
}
