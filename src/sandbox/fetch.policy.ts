// Which addresses a plugin's fetch may reach: public ones only. Loopback, private, link-local (cloud
// metadata), carrier-grade NAT, multicast, reserved and IPv6 unique-local ranges are refused unless
// PLUGIN_FETCH_ALLOW lists the host name, the address or a range containing it.
import net from "node:net";

const BLOCKED_V4: [string, number][] = [
  ["0.0.0.0", 8], // "this network"; 0.0.0.0 reaches the local host on Linux
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata (169.254.169.254)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];

const BLOCKED_V6: [string, number][] = [
  ["::", 128],
  ["::1", 128],
  ["::", 96], // IPv4-compatible (deprecated)
  ["64:ff9b:1::", 48],
  ["100::", 64], // discard
  ["2001::", 23], // IETF protocol assignments (Teredo, ...)
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
];

/** The eight 16-bit words of a valid IPv6 address (embedded dotted IPv4 included). */
function ipv6Words(address: string): number[] {
  let s = address;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  let low: number[] | null = null;
  if (v4) {
    const [, a, b, c, d] = v4.map(Number) as [number, number, number, number, number];
    low = [(a << 8) | b, (c << 8) | d];
    s = `${s.slice(0, -v4[0].length)}0:0`;
  }
  const [head = "", tail] = s.split("::");
  const first = head === "" ? [] : head.split(":");
  const last = tail === undefined || tail === "" ? [] : tail.split(":");
  const words = [...first, ...Array<string>(8 - first.length - last.length).fill("0"), ...last].map((w) => parseInt(w, 16));
  if (low) words.splice(6, 2, low[0]!, low[1]!);
  return words;
}

const v4FromWords = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** `[::1]` → `::1`; `::ffff:7f00:1` → `127.0.0.1` (an IPv4-mapped address is its IPv4 address). */
export function normalizeAddress(address: string): string {
  let a = address.trim();
  if (a.startsWith("[") && a.endsWith("]")) a = a.slice(1, -1);
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  if (net.isIPv6(a)) {
    const w = ipv6Words(a);
    if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) return v4FromWords(w[6]!, w[7]!);
  }
  return a.toLowerCase();
}

/** The IPv4 address a NAT64 (64:ff9b::/96) address carries, else null. */
function nat64Embedded(address: string): string | null {
  if (!net.isIPv6(address)) return null;
  const w = ipv6Words(address);
  if (w[0] === 0x64 && w[1] === 0xff9b && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0) return v4FromWords(w[6]!, w[7]!);
  return null;
}

export interface AddressPolicy {
  /** True when the host name itself is listed in PLUGIN_FETCH_ALLOW (every address it resolves to is then allowed). */
  hostAllowed(hostname: string): boolean;
  /** Null when `address` may be reached, else why not. */
  refusal(address: string): string | null;
}

export function createAddressPolicy(allow: readonly string[]): AddressPolicy {
  const blocked = new net.BlockList();
  for (const [a, p] of BLOCKED_V4) blocked.addSubnet(a, p, "ipv4");
  for (const [a, p] of BLOCKED_V6) blocked.addSubnet(a, p, "ipv6");
  const allowed = new net.BlockList();
  const allowedHosts = new Set<string>();
  for (const raw of allow) {
    const entry = raw.trim();
    if (entry === "") continue;
    const slash = entry.lastIndexOf("/");
    if (slash > 0) {
      const base = normalizeAddress(entry.slice(0, slash));
      const prefix = Number(entry.slice(slash + 1));
      const family = net.isIPv4(base) ? "ipv4" : net.isIPv6(base) ? "ipv6" : null;
      if (family === null || !Number.isInteger(prefix)) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" is not a valid CIDR range`);
      allowed.addSubnet(base, prefix, family);
      continue;
    }
    const address = normalizeAddress(entry);
    if (net.isIPv4(address)) allowed.addAddress(address, "ipv4");
    else if (net.isIPv6(address)) allowed.addAddress(address, "ipv6");
    else allowedHosts.add(entry.toLowerCase().replace(/\.$/, ""));
  }

  const familyOf = (a: string): "ipv4" | "ipv6" | null => (net.isIPv4(a) ? "ipv4" : net.isIPv6(a) ? "ipv6" : null);

  return {
    hostAllowed(hostname) {
      return allowedHosts.has(hostname.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, ""));
    },
    refusal(raw) {
      const address = normalizeAddress(raw);
      const family = familyOf(address);
      if (family === null) return `${raw} is not an IP address`;
      if (allowed.check(address, family)) return null;
      const embedded = nat64Embedded(address);
      if (embedded !== null && blocked.check(embedded, "ipv4") && !allowed.check(embedded, "ipv4")) return `${raw} is a private or reserved address`;
      if (blocked.check(address, family)) return `${raw} is a private or reserved address`;
      return null;
    },
  };
}
