// The load generators. Deliveries: autocannon, closed loop (every connection sends its next request when
// the last one is answered), bounded by the pending invoices set aside for the round: a round ends after
// `seconds` or when its slice is used. Reads: open loop at a fixed rate, evenly spaced (pace), so that what
// changes their latency is the server, not how hard they push; autocannon's own rate sends each second's
// quota back to back, and corrects for coordinated omission against a 1 ms interval.
import { Worker } from "node:worker_threads";
import autocannon from "autocannon";
import { eventBody, stripeSignature } from "./plugin.ts";

export interface Request {
  method: "GET" | "POST";
  path: string;
  body?: string;
  headers: Record<string, string>;
}

export interface LoadResult {
  answered: number;
  non2xx: number;
  errors: number;
  seconds: number;
  /** Answers per second over the round. */
  rps: number;
  /** Latency of the 2xx answers, ms. */
  p50: number;
  p99: number;
  /** performance.now() of the last answer. */
  lastAnswerAt: number;
  /** The round ran out of invoices before `seconds`. */
  cutShort: boolean;
  /** Paced loads: every 2xx answer's latency, ms, sorted (pooled over rounds by the report). */
  latenciesMs?: number[];
  /** Paced loads: the sending thread's own event-loop delay over the round, ms (p99 and worst). */
  clientDelayMs?: { p99: number; max: number };
}

export interface LoadOptions {
  port: number;
  connections: number;
  seconds: number;
  next: () => Request;
  /** At most this many requests (a slice of pending invoices). */
  amount?: number;
}

export function drive(options: LoadOptions): Promise<LoadResult> {
  let lastAnswerAt = performance.now();
  return new Promise((resolve, reject) => {
    const bounded = options.amount !== undefined;
    let timer: NodeJS.Timeout | undefined;
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${options.port}`,
        connections: bounded ? Math.min(options.connections, options.amount!) : options.connections,
        duration: options.seconds,
        ...(bounded ? { amount: options.amount! } : {}),
        // A stopped round ends at the next sample: 100 ms, not a second, after its last request.
        sampleInt: 100,
        requests: [{ setupRequest: (req) => ({ ...req, ...options.next() }) }],
      },
      (err, result) => {
        if (timer) clearTimeout(timer);
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const answered = result.requests.total;
        resolve({
          answered,
          non2xx: result.non2xx,
          errors: result.errors,
          seconds: result.duration,
          rps: result.duration > 0 ? answered / result.duration : 0,
          p50: result.latency.p50,
          p99: result.latency.p99,
          lastAnswerAt,
          cutShort: bounded && result.duration < options.seconds - 0.2,
        });
      },
    );
    instance.on("response", () => {
      lastAnswerAt = performance.now();
    });
    // With `amount` autocannon ignores `duration`: the round's clock is ours.
    if (bounded) timer = setTimeout(() => instance.stop(), options.seconds * 1000);
  });
}

export interface PaceOptions {
  port: number;
  /** Requests per second, one every 1000 / rate ms whether or not the earlier ones were answered. */
  rate: number;
  seconds: number;
  /** Keep-alive connections at most; a request waits for one when all are busy (counted in its latency). */
  connections: number;
  next: () => Request;
}

/** The `q` quantile of latencies sorted ascending, to 0.1 ms (NaN when there are none). */
export function percentile(sorted: readonly number[], q: number): number {
  return sorted.length === 0 ? NaN : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 10) / 10;
}

/** What the pacing thread is given: one request per slot of the round (rate × seconds), sent in turn. */
export interface PacedStream {
  port: number;
  rate: number;
  seconds: number;
  connections: number;
  requests: Request[];
}

/** What it answers: its counts, every 2xx latency sorted, and how late its own event loop ran. */
export interface PacedResult {
  answered: number;
  non2xx: number;
  errors: number;
  seconds: number;
  /** performance.timeOrigin + performance.now() of the last answer, on the sending thread. */
  lastAnswerAtEpochMs: number;
  latenciesMs: number[];
  clientDelayMs: { p99: number; max: number };
}

/**
 * Open-loop requests at a fixed rate; latency from the moment each is issued to its whole answer. The
 * requests are built here and sent from a thread of their own (pace.worker.ts), out of reach of this
 * heap's garbage collections.
 */
export async function pace(options: PaceOptions): Promise<LoadResult> {
  const total = Math.ceil(options.rate * options.seconds);
  const stream: PacedStream = { port: options.port, rate: options.rate, seconds: options.seconds, connections: options.connections, requests: Array.from({ length: total }, () => options.next()) };
  const worker = new Worker(new URL("./pace.worker.ts", import.meta.url), { workerData: stream, name: "bench-pace" });
  const result = await new Promise<PacedResult>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`the pacing thread exited with ${code} before answering`)));
  });
  // The thread ends by itself once it has answered (nothing left on its loop); the round does not wait for it.
  void worker.terminate();
  const sorted = result.latenciesMs;
  return {
    answered: result.answered,
    non2xx: result.non2xx,
    errors: result.errors,
    seconds: result.seconds,
    rps: result.answered / result.seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    lastAnswerAt: result.lastAnswerAtEpochMs - performance.timeOrigin,
    cutShort: false,
    latenciesMs: sorted,
    clientDelayMs: result.clientDelayMs,
  };
}

/** A signed Stripe-style delivery to a store's plugin. */
export function delivery(storeId: string, body: string): Request {
  return {
    method: "POST",
    path: `/api/paymentPlugins?pluginName=stripe&storeId=${storeId}`,
    body,
    headers: { "content-type": "application/json", "stripe-signature": stripeSignature(body) },
  };
}

/** A delivery the plugin answers `ignore`: verified and recorded, nothing to apply. */
export function ignoreDelivery(storeId: string): () => Request {
  const body = eventBody("customer.created", "none");
  return () => delivery(storeId, body);
}

/** payment_intent.succeeded for each invoice of `invoiceIds` in turn, from `from` (a round's slice). */
export function payments(targets: { storeId: string; invoiceId: string }[]): () => Request {
  let i = 0;
  return () => {
    // Past the slice (autocannon builds one request ahead per connection) the last one is repeated; it is
    // never sent, since `amount` stops each connection first.
    const target = targets[Math.min(i++, targets.length - 1)]!;
    return delivery(target.storeId, eventBody("payment_intent.succeeded", target.invoiceId));
  };
}

/** GETs of the given paths in turn, with the API key. */
export function reads(paths: string[], key: string): () => Request {
  let i = 0;
  return () => ({ method: "GET", path: paths[i++ % paths.length]!, headers: { authorization: key } });
}
