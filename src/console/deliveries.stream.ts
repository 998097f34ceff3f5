// The console's live view of a store's delivery log: Server-Sent Events fed by the same database poller as
// `storefront deliveries tail` (payments/deliveries.follow.ts), so it works the same whichever process
// received the webhook. One `delivery` event per new delivery (its summary, as the list shows it), a
// comment every 15 s so proxies and the browser keep the connection, and the poller stops when the client
// goes or the server closes. Each open stream holds a connection: they are counted per owner (a console
// session) and per process, so that callers can refuse more (see deliveries-stream.routes.ts).
import { PassThrough, type Readable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import { followDeliveries } from "../payments/deliveries.follow.ts";
import type { DeliveriesRepository, DeliveryFilters } from "../payments/deliveries.repository.ts";

export const HEARTBEAT_MS = 15_000;

export interface StreamOptions {
  /** How often the database is polled. */
  intervalMs: number;
  heartbeatMs: number;
  /** Streams one owner (a console session) may hold open at once. */
  perOwner: number;
  /** Streams open at once in this process. */
  max: number;
}

/** Whether a stream for `owner` may open now: `owner` (its own cap) or `process` (the process's) being full. */
export type StreamRoom = "ok" | "owner_full" | "process_full";

export interface DeliveryStreams {
  /**
   * The live stream of the store's new deliveries, as the body of a `text/event-stream` answer (the caller
   * checked the store). It ends when `signal` aborts (the client went), on closeAll, or at a heartbeat
   * when `stillAllowed` says no (the session ended: signed out, expired, the login removed).
   */
  open(storeId: string, filters: DeliveryFilters, signal: AbortSignal, log: FastifyBaseLogger, stillAllowed?: () => Promise<boolean>, owner?: string): Readable;
  /** Whether `owner` may open a stream now; check it just before open(), with nothing awaited in between. */
  room(owner: string): StreamRoom;
  /** Ends every open stream (server shutdown: an open stream would hold the server open). */
  closeAll(): void;
  readonly size: number;
}

/** What the streams read: the delivery log, the plugins' wall-time limit (how far back to overlap), the clock. */
export interface DeliveryStreamsDeps {
  deliveries: DeliveriesRepository;
  config: { plugin: { wallMs: number } };
  now: () => number;
}

export function createDeliveryStreams(deps: DeliveryStreamsDeps, options: Partial<StreamOptions> = {}): DeliveryStreams {
  const intervalMs = options.intervalMs ?? 1_000;
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const perOwner = options.perOwner ?? Number.POSITIVE_INFINITY;
  const max = options.max ?? Number.POSITIVE_INFINITY;
  const open = new Set<AbortController>();
  const byOwner = new Map<string, number>();
  const count = (owner: string, delta: number) => {
    const n = (byOwner.get(owner) ?? 0) + delta;
    if (n <= 0) byOwner.delete(owner);
    else byOwner.set(owner, n);
  };

  return {
    get size() {
      return open.size;
    },
    room(owner) {
      if (open.size >= max) return "process_full";
      return (byOwner.get(owner) ?? 0) >= perOwner ? "owner_full" : "ok";
    },
    closeAll() {
      for (const stop of open) stop.abort();
    },
    open(storeId, filters, signal, log, stillAllowed, owner) {
      const stop = new AbortController();
      open.add(stop);
      if (owner !== undefined) count(owner, 1);
      const out = new PassThrough();
      // The browser reconnects 3 s after the connection drops; a comment goes out at once so the answer starts.
      out.write("retry: 3000\n: live\n\n");
      const heartbeat = setInterval(() => {
        out.write(": heartbeat\n\n");
        stillAllowed?.().then(
          (yes) => {
            if (!yes) stop.abort();
          },
          (err: unknown) => log.warn({ err }, "delivery stream: session check failed"),
        );
      }, heartbeatMs);
      const end = () => stop.abort();
      if (signal.aborted) end();
      else signal.addEventListener("abort", end, { once: true });
      out.once("close", end);
      stop.signal.addEventListener("abort", () => {
        clearInterval(heartbeat);
        signal.removeEventListener("abort", end);
        open.delete(stop);
        if (owner !== undefined) count(owner, -1);
        out.end();
      });

      followDeliveries(deps.deliveries, storeId, filters, {
        backlog: 0,
        intervalMs,
        // A delivery commits when its plugin finishes: up to the wall-time limit after it arrived.
        overlapMs: 2 * deps.config.plugin.wallMs + 5_000,
        signal: stop.signal,
        now: deps.now,
        onDelivery: (d) => {
          if (!stop.signal.aborted) out.write(`event: delivery\nid: ${d.id}\ndata: ${JSON.stringify(d)}\n\n`);
        },
      }).then(
        () => stop.abort(),
        (err: unknown) => {
          // The database went away: end the stream; the browser reconnects and the page says so meanwhile.
          log.warn({ err }, "delivery stream ended");
          stop.abort();
        },
      );
      return out;
    },
  };
}
