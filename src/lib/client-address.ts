// Who the client is. Rate limits, failed sign-ins and webhook source ranges are charged to the client's
// address: the socket's peer, unless TRUST_PROXY names the proxies in front, as a hop count or as their
// addresses and CIDR ranges. Then the client is the rightmost X-Forwarded-For entry that a trusted proxy
// did not add (proxy-addr, the library behind Fastify's trustProxy and Express's). `TRUST_PROXY=true`
// (trust every hop) is refused: the leftmost entry is whatever the client wrote, so every client could
// choose its own address, escape its failed-sign-in budget and spend someone else's (docs/operations.md).
// Requests that carry X-Forwarded-For from a peer that is not trusted are noted: a proxy in front that
// TRUST_PROXY does not name makes every client look like that proxy.
import proxyAddr from "@fastify/proxy-addr";

export type TrustProxy = { kind: "none" } | { kind: "hops"; hops: number } | { kind: "addresses"; entries: string[] };

const MAX_HOPS = 16;
const NAMED = ["loopback", "linklocal", "uniquelocal"];

/** TRUST_PROXY as written, or the problem with it (one line naming the variable and the accepted forms). */
export function parseTrustProxy(raw: string | undefined): { value: TrustProxy } | { problem: string } {
  const text = (raw ?? "").trim();
  if (text === "" || /^(false|no|off|0)$/i.test(text)) return { value: { kind: "none" } };
  const forms = `the number of proxies in front (TRUST_PROXY=1), or their addresses and CIDR ranges, comma-separated (TRUST_PROXY=10.0.0.0/8,${NAMED.join(",")})`;
  if (/^(true|yes|on)$/i.test(text)) {
    return { problem: `TRUST_PROXY=${text} would let every client choose its own address (the leftmost X-Forwarded-For entry is whatever the client sent): give ${forms}` };
  }
  if (/^[0-9]+$/.test(text)) {
    const hops = Number(text);
    return hops <= MAX_HOPS ? { value: { kind: "hops", hops } } : { problem: `TRUST_PROXY must be at most ${MAX_HOPS} proxies, got ${text}` };
  }
  const entries = text.split(",").map((e) => e.trim());
  for (const entry of entries) {
    try {
      proxyAddr.compile([entry]);
    } catch {
      return { problem: `TRUST_PROXY: "${entry}" is not an IP address, a CIDR range or one of ${NAMED.join(", ")}; give ${forms}` };
    }
  }
  return { value: { kind: "addresses", entries } };
}

/** Whether the proxy at `address`, `hop` hops from this server (0: the socket's peer), is trusted. */
export type TrustFunction = (address: string, hop: number) => boolean;

/** Fastify's trustProxy option: false, or proxy-addr's trust function (a hop count as a function: Fastify ignores a bare number). */
export function trustFunction(setting: TrustProxy): TrustFunction | false {
  switch (setting.kind) {
    case "none":
      return false;
    case "hops":
      return (_address, hop) => hop < setting.hops;
    case "addresses":
      return proxyAddr.compile(setting.entries);
  }
}

export interface ForwardedNotice {
  /** Notes a request; returns true the first time a request carries X-Forwarded-For from a peer that is not trusted. */
  note(peer: string | undefined, forwardedFor: string | string[] | undefined, now: number): boolean;
  /** For /readyz: what TRUST_PROXY trusts, and the untrusted forwarded requests seen since start. */
  view(): { trustProxy: TrustProxy["kind"]; untrustedForwardedFor: { requests: number; firstSeenAt: string; lastSeenAt: string } | null };
}

export function createForwardedNotice(setting: TrustProxy): ForwardedNotice {
  const trust = trustFunction(setting);
  let seen: { requests: number; first: number; last: number } | null = null;
  return {
    note(peer, forwardedFor, now) {
      if (forwardedFor === undefined || peer === undefined) return false;
      if (trust !== false && trust(peer, 0)) return false;
      if (seen !== null) {
        seen.requests++;
        seen.last = now;
        return false;
      }
      seen = { requests: 1, first: now, last: now };
      return true;
    },
    view() {
      const iso = (ms: number) => new Date(ms).toISOString();
      return {
        trustProxy: setting.kind,
        untrustedForwardedFor: seen === null ? null : { requests: seen.requests, firstSeenAt: iso(seen.first), lastSeenAt: iso(seen.last) },
      };
    },
  };
}
