// A plugin's outbound HTTP, run on the main thread with undici. The destination is checked three
// times, each with the port: the URL's host when it is an IP literal (any spelling the URL parser
// accepts: 2130706433, 0x7f.1, [::ffff:127.0.0.1]), every address DNS returns, and finally the
// address and port the socket is actually connected to, which is the check that cannot be bypassed. Redirects are followed by hand
// (at most 3, http and https only) and each hop goes through the same checks; the response size and
// the time are bounded.
import net from "node:net";
import type { Dispatcher } from "undici";
import { createAddressPolicy } from "../../platform/outbound/address-policy.ts";
import { createGuardedLookup, describeOutboundError, guardConnector, isPolicyRefusal, OutboundRefused, portOf } from "../../platform/outbound/guarded-connect.ts";
import type { LookupFunction } from "../../platform/outbound/guarded-connect.ts";
import { lazyAgent } from "../../platform/outbound/lazy-agent.ts";
import type { FetchReply, FetchRequest } from "../sandbox.protocol.ts";
import type { FetchRecord, SandboxLimits } from "../sandbox.types.ts";

const MAX_REDIRECTS = 3;
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export interface FetchContext {
  /** Aborted when the run ends (wall time, kill, pool closed). */
  signal: AbortSignal;
  /** performance.now() value past which nothing may still be running. */
  deadline: number;
}

export interface Fetcher {
  fetch(request: FetchRequest, context: FetchContext): Promise<{ reply: FetchReply; record: FetchRecord }>;
  close(): Promise<void>;
}

export function createFetcher(limits: SandboxLimits, lookup?: LookupFunction): Fetcher {
  const policy = createAddressPolicy(limits.fetchAllow);
  const guardedLookup = createGuardedLookup(policy, lookup);

  const agent = lazyAgent(
    ({ Agent, buildConnector }) =>
      new Agent({
        connect: guardConnector(buildConnector({ lookup: guardedLookup as never, timeout: limits.fetchTimeoutMs, allowH2: false }), policy),
        keepAliveTimeout: 4_000,
        maxResponseSize: limits.fetchMaxBytes,
      }),
  );

  /** Refuses a URL before any network traffic: scheme, credentials, and IP-literal hosts. */
  function precheck(url: URL): string | null {
    if (url.protocol !== "http:" && url.protocol !== "https:") return `only http and https URLs can be fetched, not ${url.protocol}`;
    if (url.username !== "" || url.password !== "") return "URLs with credentials are not supported";
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (net.isIP(host) !== 0 && !policy.hostAllowed(url.hostname, portOf(url))) return policy.refusal(host, portOf(url));
    return null;
  }

  async function readBody(body: Dispatcher.ResponseData["body"]): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limits.fetchMaxBytes) {
        body.destroy();
        throw new OutboundRefused(`the response body is larger than ${limits.fetchMaxBytes} bytes`);
      }
      chunks.push(buf);
    }
    return Buffer.concat(chunks, size);
  }

  async function fetchOnce(request: FetchRequest, context: FetchContext): Promise<Outcome> {
    const method = request.method.toUpperCase();
    if (!METHODS.has(method)) return { ok: false, error: `unsupported method ${request.method}`, responseBytes: 0 };
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return { ok: false, error: `invalid URL: ${request.url.slice(0, 200)}`, responseBytes: 0 };
    }
    const timeoutMs = Math.max(1, Math.ceil(Math.min(request.timeoutMs ?? limits.fetchTimeoutMs, limits.fetchTimeoutMs, context.deadline - performance.now())));
    const guard = guardFetch(context.signal, timeoutMs);
    const hop: Hop = { url, method, body: request.body, headers: Object.assign(Object.create(null) as Record<string, string>, request.headers ?? {}) };
    try {
      return await follow(hop, guard.signal, timeoutMs);
    } catch (err) {
      if (guard.timedOut()) return { ok: false, error: `fetch timed out after ${Math.round(timeoutMs)} ms`, responseBytes: 0 };
      if (context.signal.aborted) return { ok: false, error: "fetch aborted: the run ended", responseBytes: 0 };
      return failure(err);
    } finally {
      guard.release();
    }
  }

  /** Requests `hop`, following redirects by hand (each hop checked again), and reads the final answer. */
  async function follow(hop: Hop, signal: AbortSignal, timeoutMs: number): Promise<Outcome> {
    for (let count = 0; ; count++) {
      const refusal = precheck(hop.url);
      if (refusal !== null) return { ok: false, error: `fetch refused: ${refusal}`, responseBytes: 0 };
      const response = await (await agent.get()).request({
        origin: hop.url.origin,
        path: `${hop.url.pathname}${hop.url.search}`,
        method: hop.method as Dispatcher.HttpMethod,
        headers: hop.headers,
        body: hop.body === null ? null : Buffer.from(hop.body.buffer, hop.body.byteOffset, hop.body.byteLength),
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      response.body.on("error", () => {}); // errors surface through the reads below
      const location = response.headers.location;
      if (REDIRECTS.has(response.statusCode) && typeof location === "string") {
        response.body.destroy();
        if (count >= MAX_REDIRECTS) return { ok: false, error: `too many redirects (more than ${MAX_REDIRECTS})`, responseBytes: 0 };
        const refused = redirect(hop, response.statusCode, location);
        if (refused !== null) return refused;
        continue;
      }
      const bytes = await readBody(response.body);
      const outHeaders: [string, string][] = [];
      for (const [name, value] of Object.entries(response.headers)) {
        if (value === undefined) continue;
        outHeaders.push([name.toLowerCase(), Array.isArray(value) ? value.join(", ") : value]);
      }
      return { ok: true, status: response.statusCode, headers: outHeaders, body: bytes, responseBytes: bytes.length };
    }
  }

  /** A fetch that failed other than by its timeout or the run's end. */
  function failure(err: unknown): Outcome {
    if (isPolicyRefusal(err)) {
      return { ok: false, error: `fetch refused: ${describeOutboundError(err)}`, responseBytes: 0 };
    }
    if ((err as NodeJS.ErrnoException).code === "UND_ERR_RES_EXCEEDED_MAX_SIZE") {
      return { ok: false, error: `fetch refused: the response body is larger than ${limits.fetchMaxBytes} bytes`, responseBytes: 0 };
    }
    return { ok: false, error: `fetch failed: ${describeOutboundError(err)}`, responseBytes: 0 };
  }

  return {
    async fetch(request, context) {
      const started = performance.now();
      const result = await fetchOnce(request, context);
      const record: FetchRecord = {
        url: request.url.slice(0, 2048),
        method: request.method.toUpperCase().slice(0, 16),
        status: result.ok ? result.status : null,
        error: result.ok ? null : result.error,
        durationMs: performance.now() - started,
        requestBytes: request.body?.byteLength ?? 0,
        responseBytes: result.responseBytes,
      };
      const { responseBytes: _, ...reply } = result;
      return { reply, record };
    },
    close: () => agent.close(),
  };
}

type Outcome = FetchReply & { responseBytes: number };

/** Where the next request of a fetch goes, and what it sends (a redirect may change all of it). */
interface Hop {
  url: URL;
  method: string;
  body: Uint8Array | null;
  headers: Record<string, string>;
}

/**
 * One controller per fetch, detached from the run's signal and timer as soon as the fetch is over
 * (`release`): undici keeps listening on the signal it was given, and an abort that arrives after the
 * response was read would destroy that finished body with an error nobody handles.
 */
function guardFetch(runSignal: AbortSignal, timeoutMs: number): { signal: AbortSignal; timedOut: () => boolean; release: () => void } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error("timeout"));
  }, timeoutMs);
  const onRunEnd = () => controller.abort(new Error("the run ended"));
  if (runSignal.aborted) onRunEnd();
  else runSignal.addEventListener("abort", onRunEnd, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    release: () => {
      clearTimeout(timer);
      runSignal.removeEventListener("abort", onRunEnd);
    },
  };
}

/** Moves `hop` to a redirect's location, as browsers do; an answer when the redirect is refused. */
function redirect(hop: Hop, status: number, location: string): Outcome | null {
  let next: URL;
  try {
    next = new URL(location, hop.url);
  } catch {
    return { ok: false, error: `invalid redirect location: ${location.slice(0, 200)}`, responseBytes: 0 };
  }
  if (next.protocol !== "http:" && next.protocol !== "https:") {
    return { ok: false, error: `redirect to ${next.protocol} refused: only http and https`, responseBytes: 0 };
  }
  if (status === 303 || ((status === 301 || status === 302) && hop.method === "POST")) {
    if (hop.method !== "HEAD") hop.method = "GET";
    hop.body = null;
    for (const name of Object.keys(hop.headers)) if (/^content-/i.test(name)) delete hop.headers[name];
  }
  if (next.origin !== hop.url.origin) {
    for (const name of Object.keys(hop.headers)) if (/^(authorization|cookie|proxy-authorization)$/i.test(name)) delete hop.headers[name];
  }
  hop.url = next;
  return null;
}
