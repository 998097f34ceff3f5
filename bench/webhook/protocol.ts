// What the webhook benchmark's server process (server.ts) tells its runner (run.ts) over IPC: the data
// layout it built, its CPU on request, and how to read the read model's Prometheus gauges. Shared by both.

/** A set of pending invoices in payment order; each round pays its own slice of them. */
export interface Payments {
  storeId: string;
  invoiceIds: string[];
}

export interface Layout {
  port: number;
  /** The store of `ignore` and of pushInvoice on one store (customers with 5 invoices each). */
  push: Payments;
  /** One pending-invoice list per store, each store with its own plugin installation. */
  stores: Payments[];
  /** Pending invoices of customers with `historyInvoices` invoices each, in the `push` store. */
  history: Payments;
  /** The store that reads read and the burst pays, with an API key and the path of every list page. */
  reads: Payments & { key: string; pages: { invoices: string[]; customers: string[] } };
  /** A store whose plugin runs as plain TypeScript instead of in the sandbox (--plain-ts), or null. */
  plainTs: string | null;
  /** PostgreSQL: the application_name of this server's connections (its backends in pg_stat_activity). */
  postgresApplicationName: string | null;
  /** SQLite: the database file (the runner reads its write-ahead log's index); null on PostgreSQL. */
  sqliteFile: string | null;
  /** Whether this version exposes storefront_readmodel_backlog. */
  readModelGauges: boolean;
  /** Seconds spent building the layout, by step. */
  setupSeconds: Record<string, number>;
}

export type ServerMessage =
  | { type: "ready"; layout: Layout }
  | { type: "failed"; error: string }
  /**
   * `mainMicros`: the main thread's own CPU (the one that answers webhooks and, on SQLite, writes);
   * `mainWaitMicros`: its time runnable but waiting for a core (Linux schedstat; null elsewhere);
   * `threads`: µs by thread name (/proc, 10 ms ticks; empty elsewhere);
   * `loopLateMs`: how late the main thread's event loop ran since the last such message (p99 and worst, ms);
   * `readsServerMs`: every read API answer since then, as the server timed it (ms);
   * `pageStages`: the service's histogram of list pages by stage, as it stands (null: a version without it).
   */
  | { type: "cpu"; id: number; micros: number; mainMicros: number; mainWaitMicros: number | null; threads: Record<string, number>; plainTsRuns: number; loopLateMs: { p99: number; max: number }; readsServerMs: number[]; pageStages: PageStageBuckets | null };

/**
 * storefront_read_page_seconds as it stands: by stage (held, queued, built, returned), its cumulative buckets as
 * [upper bound in seconds, count], +Inf last.
 */
export type PageStageBuckets = Record<string, [number, number][]>;

/**
 * Each stage's p99 over what the histogram counted between two readings, ms: linear within the bucket it
 * falls in (the buckets double from 0.25 ms, so a figure is good to its bucket). A p99 beyond the last bound
 * is that bound. Stages with no page in between are left out.
 */
export function stagesP99Ms(before: PageStageBuckets | null, after: PageStageBuckets | null): Record<string, number> | null {
  if (after === null) return null;
  const out: Record<string, number> = {};
  for (const [stage, buckets] of Object.entries(after)) {
    const earlier = new Map(before?.[stage] ?? []);
    const counts = buckets.map(([le, n]): [number, number] => [le, n - (earlier.get(le) ?? 0)]);
    const total = counts.at(-1)?.[1] ?? 0;
    if (total === 0) continue;
    const rank = 0.99 * total;
    let lower = 0;
    let below = 0;
    for (const [le, n] of counts) {
      if (n >= rank) {
        out[stage] = Number.isFinite(le) ? Math.round((lower + ((rank - below) / (n - below)) * (le - lower)) * 1e4) / 10 : Math.round(lower * 1e4) / 10;
        break;
      }
      if (Number.isFinite(le)) lower = le;
      below = n;
    }
  }
  return out;
}

export type RunnerMessage = { type: "cpu"; id: number };

/** The read model's gauges as the new code names them; null when this version has none. */
export interface ReadModelGauges {
  backlog: number;
  lagSeconds: number | null;
}

/** Sums every series of the backlog gauge (and the largest lag) in a Prometheus text exposition. */
export function parseReadModelGauges(text: string): ReadModelGauges | null {
  let backlog: number | null = null;
  let lag: number | null = null;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = /^(storefront_readmodel_backlog|storefront_readmodel_lag_seconds)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[2]);
    if (!Number.isFinite(value)) continue;
    if (match[1] === "storefront_readmodel_backlog") backlog = (backlog ?? 0) + value;
    else lag = Math.max(lag ?? 0, value);
  }
  return backlog === null ? null : { backlog, lagSeconds: lag };
}

/**
 * How late an event loop ran, from Node's histogram of its timer (monitorEventLoopDelay): p99 and worst, ms
 * to 0.1. The histogram counts each whole interval in nanoseconds, so the timer's own interval comes off.
 */
export function loopLateness(histogram: { percentile(q: number): number; max: number }, timerMs: number): { p99: number; max: number } {
  const late = (nanos: number) => Math.max(0, Math.round(nanos / 1e5 - timerMs * 10) / 10);
  return { p99: late(histogram.percentile(99)), max: late(histogram.max) };
}
