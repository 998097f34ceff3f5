// Where webhooks may go: http(s) URLs to public addresses, under the same address policy as a plugin's
// fetch (ENDPOINT_ALLOW lists exceptions). A URL is checked when it is saved, and every connection is
// checked again by the address the socket actually reached, which no DNS answer can dodge.
import net from "node:net";
import { Agent, buildConnector } from "undici";
import { guardConnector } from "../sandbox/fetch.client.ts";
import { createAddressPolicy, type AddressPolicy } from "../sandbox/fetch.policy.ts";

export const MAX_URL_LENGTH = 2048;
const EXCERPT_BYTES = 1024;

/** Why `text` cannot be an endpoint URL, or null when it can. */
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
  // With the URL's port, so that an ENDPOINT_ALLOW entry with one (127.0.0.1:4000) counts at save as it does at send.
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
  if (net.isIP(host) !== 0 && !policy.hostAllowed(url.hostname, port)) {
    const refusal = policy.refusal(host, port);
    if (refusal !== null) return `url is refused: ${refusal} (ENDPOINT_ALLOW lists exceptions)`;
  }
  return null;
}

export type SendResult =
  | { ok: true; status: number; excerpt: string; durationMs: number }
  | { ok: false; error: string; durationMs: number };

export interface EndpointSender {
  policy: AddressPolicy;
  send(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

export function createEndpointSender(allow: readonly string[], timeoutMs: number): EndpointSender {
  const policy = createAddressPolicy(allow);
  const agent = new Agent({
    connect: guardConnector(buildConnector({ timeout: timeoutMs, allowH2: false }), policy),
    keepAliveTimeout: 4_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });

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
        const response = await agent.request({ origin: url.origin, path: `${url.pathname}${url.search}`, method: "POST", headers: { "user-agent": "storefront-webhooks/1", ...headers }, body, signal });
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
        return { ok: true, status: response.statusCode, excerpt, durationMs: elapsed() };
      } catch (err) {
        if (signal.aborted) return { ok: false, error: `no answer within ${timeoutMs} ms`, durationMs: elapsed() };
        return { ok: false, error: describe(err), durationMs: elapsed() };
      }
    },
    close: () => agent.close(),
  };
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    const code = (err as NodeJS.ErrnoException).code;
    return `${err.message}${cause}${code !== undefined && !err.message.includes(code) ? ` (${code})` : ""}`.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
