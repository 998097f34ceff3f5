// A plugin installation's source ranges: the addresses its provider sends webhooks from (Stripe and PayPal
// publish theirs). A delivery from any other client address is refused before any work. Matched with
// proxy-addr, which reads IPv4-mapped IPv6 addresses as their IPv4 address.
import net from "node:net";
import proxyAddr from "@fastify/proxy-addr";

export const MAX_SOURCE_RANGES = 200;

/** Why `ranges` cannot be stored, or null. Addresses and CIDR ranges only (no named ranges: a provider is never on loopback). */
export function sourceRangesProblem(ranges: readonly string[]): string | null {
  if (ranges.length === 0) return "allowedSources needs at least one address or CIDR range; null accepts deliveries from anywhere";
  if (ranges.length > MAX_SOURCE_RANGES) return `allowedSources holds at most ${MAX_SOURCE_RANGES} ranges`;
  for (const raw of ranges) {
    const range = raw.trim();
    const [address = "", prefix] = range.split("/");
    const ok = net.isIP(address) !== 0 && (prefix === undefined || /^[0-9]{1,3}$/.test(prefix));
    try {
      if (ok) proxyAddr.compile([range]);
    } catch {
      return `allowedSources: "${raw.slice(0, 64)}" is not an IP address or CIDR range`;
    }
    if (!ok) return `allowedSources: "${raw.slice(0, 64)}" is not an IP address or CIDR range (e.g. 54.187.174.169/32 or 2600:1f16::/36)`;
  }
  return null;
}

/** Compiled matchers, kept per distinct list: the webhook asks on every delivery. */
const compiled = new Map<string, (address: string) => boolean>();
const MAX_COMPILED = 1000;

/** Whether `address` (the client's) is in one of `ranges`. */
export function inSourceRanges(ranges: readonly string[], address: string): boolean {
  const key = ranges.join(",");
  let match = compiled.get(key);
  if (match === undefined) {
    const trust = proxyAddr.compile([...ranges]);
    match = (a) => trust(a, 0);
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, match);
  }
  return match(address);
}
