// The console's live view of a store's delivery log: Server-Sent Events fed by the same database poller as
// `storefront deliveries tail` (plugins/deliveries.follow.ts), so it works the same whichever process
// received the webhook. One `delivery` event per new delivery (its summary, as the list shows it), a
// comment every 15 s so proxies and the browser keep the connection, and the poller stops when the client
// goes or the server closes.
import type { FastifyReply, FastifyRequest } from "fastify";
import { followDeliveries } from "../plugins/deliveries.follow.ts";
import type { DeliveryFilters } from "../plugins/deliveries.repository.ts";
import type { Services } from "../services.ts";

export const HEARTBEAT_MS = 15_000;

export interface StreamOptions {
  /** How often the database is polled. */
  intervalMs: number;
  heartbeatMs: number;
}

export interface DeliveryStreams {
  /** Answers the request with the live stream of the store's new deliveries (the store was checked). */
  open(request: FastifyRequest, reply: FastifyReply, storeId: string, filters: DeliveryFilters, headers: Record<string, string>): void;
  /** Ends every open stream (server shutdown: an open stream would hold the server open). */
  closeAll(): void;
  readonly size: number;
}

export function createDeliveryStreams(services: Services, options: Partial<StreamOptions> = {}): DeliveryStreams {
  const intervalMs = options.intervalMs ?? 1_000;
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const open = new Set<AbortController>();

  return {
    get size() {
      return open.size;
    },
    closeAll() {
      for (const stop of open) stop.abort();
    },
    open(request, reply, storeId, filters, headers) {
      const stop = new AbortController();
      open.add(stop);
      // Past this point Fastify sends nothing: the headers its hooks would add are the caller's to pass.
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        ...headers,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        "x-accel-buffering": "no",
        "x-request-id": request.id,
      });
      // No retry storm: the browser reconnects after 3 s if the connection drops.
      res.write("retry: 3000\n: live\n\n");
      const heartbeat = setInterval(() => res.write(": heartbeat\n\n"), heartbeatMs);
      const end = () => stop.abort();
      request.raw.once("close", end);
      res.once("close", end);
      stop.signal.addEventListener("abort", () => {
        clearInterval(heartbeat);
        open.delete(stop);
        if (!res.writableEnded) res.end();
      });

      followDeliveries(services.deliveries, storeId, filters, {
        backlog: 0,
        intervalMs,
        // A delivery commits when its plugin finishes: up to the wall-time limit after it arrived.
        overlapMs: 2 * services.config.plugin.wallMs + 5_000,
        signal: stop.signal,
        now: services.now,
        onDelivery: (d) => {
          if (!stop.signal.aborted) res.write(`event: delivery\nid: ${d.id}\ndata: ${JSON.stringify(d)}\n\n`);
        },
      }).then(
        () => stop.abort(),
        (err: unknown) => {
          // The database went away: end the stream, the browser reconnects and the page says so meanwhile.
          request.log.warn({ err }, "delivery stream ended");
          stop.abort();
        },
      );
    },
  };
}
