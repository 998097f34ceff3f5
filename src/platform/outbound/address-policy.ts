// Which addresses outbound HTTP may reach: public ones only. Loopback, private, link-local (cloud
// metadata), carrier-grade NAT, multicast, reserved and IPv6 unique-local ranges are refused unless
// PLUGIN_FETCH_ALLOW lists the host name, the address or a range containing it, for every port or
// for one (`host:port`, `10.0.0.5:8080`, `[fd00::5]:443`, `10.0.0.0/8:5432`, `[fd00::/8]:443`).
// Plugin fetch uses it; so can any other outbound traffic (connectionRefusal on the connected socket).
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
  ["::ffff:0:0:0", 96], // IPv4-translated (SIIT): ::ffff:0:a00:1 is 10.0.0.1 behind a translator
  ["64:ff9b:1::", 48],
  ["100::", 64], // discard
  ["2001::", 23], // IETF protocol assignments (Teredo, ...)
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4
  ["3fff::", 20], // documentation (RFC 9637)
  ["5f00::", 16], // segment routing (SRv6) SIDs
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
  /**
   * True when PLUGIN_FETCH_ALLOW names the host itself for `port` (or for every port): every address
   * it resolves to may then be reached. Without a port only entries without one count.
   */
  hostAllowed(hostname: string, port?: number): boolean;
  /** Null when `address` may be reached on `port`, else why not. Without a port only entries without one count. */
  refusal(address: string, port?: number): string | null;
}

/** One PLUGIN_FETCH_ALLOW entry taken apart: what it names and the port it is bound to (null: every port). */
interface AllowEntry {
  target: string;
  port: number | null;
}

const PORT = /^[0-9]{1,5}$/;

function parsePort(entry: string, text: string): number {
  const port = Number(text);
  if (!PORT.test(text) || port < 1 || port > 65535) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" has an invalid port (1-65535)`);
  return port;
}

/** `[v6]:port`, `[v6/len]:port`, `host:port`, `v4:port`, `v4/len:port`; a bare IPv6 address (two or more colons) has no port. */
function splitEntry(entry: string): AllowEntry {
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]");
    if (close < 0) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" has no closing bracket`);
    const inner = entry.slice(1, close);
    const base = inner.split("/")[0]!;
    if (!net.isIPv6(base)) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}": only IPv6 addresses go in brackets`);
    const rest = entry.slice(close + 1);
    if (rest === "") return { target: inner, port: null };
    if (!rest.startsWith(":")) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" is not [address]:port`);
    return { target: inner, port: parsePort(entry, rest.slice(1)) };
  }
  const colons = entry.split(":").length - 1;
  if (colons !== 1) return { target: entry, port: null };
  const at = entry.indexOf(":");
  return { target: entry.slice(0, at), port: parsePort(entry, entry.slice(at + 1)) };
}

export function createAddressPolicy(allow: readonly string[]): AddressPolicy {
  const blocked = new net.BlockList();
  for (const [a, p] of BLOCKED_V4) blocked.addSubnet(a, p, "ipv4");
  for (const [a, p] of BLOCKED_V6) blocked.addSubnet(a, p, "ipv6");
  // Allowed addresses and ranges by port; key 0 holds the entries that allow every port.
  const allowed = new Map<number, net.BlockList>();
  const allowedHosts = new Map<string, Set<number>>();
  const listFor = (port: number | null): net.BlockList => {
    const key = port ?? 0;
    let list = allowed.get(key);
    if (!list) allowed.set(key, (list = new net.BlockList()));
    return list;
  };
  for (const raw of allow) {
    const entry = raw.trim();
    if (entry === "") continue;
    const { target, port } = splitEntry(entry);
    const slash = target.lastIndexOf("/");
    if (slash > 0) {
      const base = normalizeAddress(target.slice(0, slash));
      const prefixText = target.slice(slash + 1);
      const prefix = Number(prefixText);
      const family = net.isIPv4(base) ? "ipv4" : net.isIPv6(base) ? "ipv6" : null;
      if (family === null || !/^[0-9]{1,3}$/.test(prefixText) || prefix > (family === "ipv4" ? 32 : 128)) {
        throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" is not a valid CIDR range`);
      }
      listFor(port).addSubnet(base, prefix, family);
      continue;
    }
    const address = normalizeAddress(target);
    if (net.isIPv4(address)) listFor(port).addAddress(address, "ipv4");
    else if (net.isIPv6(address)) listFor(port).addAddress(address, "ipv6");
    else {
      const host = hostKey(target);
      if (!/^[a-z0-9_.-]+$/.test(host)) throw new RangeError(`PLUGIN_FETCH_ALLOW: "${entry}" is not a host name, address or range`);
      let ports = allowedHosts.get(host);
      if (!ports) allowedHosts.set(host, (ports = new Set()));
      ports.add(port ?? 0);
    }
  }

  const familyOf = (a: string): "ipv4" | "ipv6" | null => (net.isIPv4(a) ? "ipv4" : net.isIPv6(a) ? "ipv6" : null);
  const isAllowed = (address: string, family: "ipv4" | "ipv6", port: number | undefined): boolean =>
    (allowed.get(0)?.check(address, family) ?? false) || (port !== undefined && port !== 0 && (allowed.get(port)?.check(address, family) ?? false));

  return {
    hostAllowed(hostname, port) {
      const ports = allowedHosts.get(hostKey(hostname));
      return ports !== undefined && (ports.has(0) || (port !== undefined && port !== 0 && ports.has(port)));
    },
    refusal(raw, port) {
      const address = normalizeAddress(raw);
      const family = familyOf(address);
      if (family === null) return `${raw} is not an IP address`;
      if (isAllowed(address, family, port)) return null;
      const embedded = nat64Embedded(address);
      if (embedded !== null && blocked.check(embedded, "ipv4") && !isAllowed(embedded, "ipv4", port)) return `${raw} is a private or reserved address`;
      if (blocked.check(address, family)) return `${raw} is a private or reserved address`;
      return null;
    },
  };
}

function hostKey(hostname: string): string {
  return hostname.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, "");
}

/**
 * The check of an established connection, by the address and port the socket is actually connected
 * to (no spelling of a host, DNS answer or redirect can dodge it): null when it may be used, else why
 * not. A host listed in the allow list for that port is trusted by name.
 */
export function connectionRefusal(policy: AddressPolicy, hostname: string, socket: { remoteAddress?: string | undefined; remotePort?: number | undefined }): string | null {
  const port = socket.remotePort;
  if (policy.hostAllowed(hostname, port)) return null;
  if (socket.remoteAddress === undefined) return "the connection has no remote address";
  return policy.refusal(socket.remoteAddress, port);
}
