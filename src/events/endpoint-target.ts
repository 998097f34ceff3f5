// Where webhooks may go: http(s) URLs to public addresses, under the same address policy as a plugin's
// fetch (ENDPOINT_ALLOW lists exceptions, each optionally bound to a port). A URL is checked when it is
// saved (an IP literal, with its port), and at every delivery a name is resolved and each of its addresses
// checked before any connection is opened; the connected socket is checked once more.
// Every refusal reads the same, whatever the address and whether anything listens there: a store's console
// login sees its attempts' errors, and they must not map the operator's network.
import net from "node:net";
import { createGuardedLookup, guardConnector, isPolicyRefusal, portOf } from "../platform/outbound/guarded-connect.ts";
import { createAddressPolicy, type AddressPolicy } from "../platform/outbound/address-policy.ts";
import type { LookupFunction } from "../platform/outbound/guarded-connect.ts";
import { lazyAgent } from "../platform/outbound/lazy-agent.ts";

export const MAX_URL_LENGTH = 2048;
export const ENDPOINT_REFUSED = "the address is private or reserved (ENDPOINT_ALLOW lists exceptions)";
const EXCERPT_BYTES = 1024;

/** Why `text` cannot be an endpoint URL, or null when it can. A host name is checked when it is resolved, at delivery. */
export function endpointUrlProblem(text: string, policy: AddressPolicy): string | null {
  if (text.length > MAX_URL_LENGTH) return `url must be at most ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "url is not a valid absolute URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "url must be http or https";
  if (url.username !== "" || url.password !== "") return "url must not carry credentials";
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = portOf(url);
  if (net.isIP(host) !== 0 && !policy.hostAllowed(url.hostname, port) && policy.refusal(host, port) !== null) return `url is refused: ${ENDPOINT_REFUSED}`;
  return null;
}

export type SendResult =
  | { ok: true; status: number; excerpt: string; headers: Record<string, string>; durationMs: number }
  | { ok: false; error: string; durationMs: number };

export interface EndpointSender {
  policy: AddressPolicy;
  send(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

/** `lookup` stands in for DNS (tests). */
export function createEndpointSender(allow: readonly string[], timeoutMs: number, lookup?: LookupFunction): EndpointSender {
  const policy = createAddressPolicy(allow);
  const agent = lazyAgent(
    ({ Agent, buildConnector }) =>
      new Agent({
        connect: guardConnector(buildConnector({ lookup: createGuardedLookup(policy, lookup) as never, timeout: timeoutMs, allowH2: false }), policy),
        keepAliveTimeout: 4_000,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      }),
  );

  return {
    policy,
    async send(text, headers, body) {
      const started = performance.now();
      const elapsed = () => Math.round((performance.now() - started) * 1000) / 1000;
      const problem = endpointUrlProblem(text, policy);
      if (problem !== null) return { ok: false, error: problem, durationMs: 0 };
      const url = new URL(text);
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const response = await (await agent.get()).request({ origin: url.origin, path: `${url.pathname}${url.search}`, method: "POST", headers: { "user-agent": "storefront-webhooks/1", ...headers }, body, signal });
        response.body.on("error", () => {});
        // Only the start of the answer is kept: enough to show what the receiver said.
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of response.body) {
          chunks.push(chunk as Buffer);
          size += (chunk as Buffer).length;
          if (size >= EXCERPT_BYTES) {
            response.body.destroy();
            break;
          }
        }
        // Text as stored: PostgreSQL text cannot hold NUL, and a receiver's answer may contain anything.
        const excerpt = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString("utf8").replaceAll("\u0000", "");
        return { ok: true, status: response.statusCode, excerpt, headers: answerHeaders(response.headers), durationMs: elapsed() };
      } catch (err) {
        if (isPolicyRefusal(err)) return { ok: false, error: ENDPOINT_REFUSED, durationMs: elapsed() };
        if (signal.aborted) return { ok: false, error: `no answer within ${timeoutMs} ms`, durationMs: elapsed() };
        return { ok: false, error: describe(err), durationMs: elapsed() };
      }
    },
    close: () => agent.close(),
  };
}

/** The answer's headers as text (NUL-free, a few KiB at most): what the console shows of each attempt. */
function answerHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  let size = 0;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const text = (Array.isArray(value) ? value.join(", ") : value).replaceAll("\u0000", "").slice(0, 1024);
    size += name.length + text.length;
    if (size > 8192) break;
    out[name] = text;
  }
  return out;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    const code = (err as NodeJS.ErrnoException).code;
    return `${err.message}${cause}${code !== undefined && !err.message.includes(code) ? ` (${code})` : ""}`.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
