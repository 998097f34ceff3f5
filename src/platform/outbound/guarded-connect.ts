// Outbound connections under the address policy, before and after connecting: every address a name
// resolves to is checked with the port before any connection is opened, and the address the socket is
// actually connected to is checked again (the check no spelling of a host, DNS answer or proxy can dodge).
// Used by the sandbox's fetch and by the events dispatcher alike.
import { AsyncLocalStorage } from "node:async_hooks";
import dns from "node:dns";
import type { buildConnector as BuildConnector } from "undici";
import { connectionRefusal, type AddressPolicy } from "./address-policy.ts";

/** The policy refused a destination (not a network failure). */
export class OutboundRefused extends Error {}

export type LookupAddress = { address: string; family: number };
/** dns.lookup with `all: true`, as tests substitute it. */
export type LookupFunction = (
  hostname: string,
  options: { all: true; family?: number },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** The port a connection is being made to, for the resolution-time check (dns.lookup is not told it). */
const connectingPort = new AsyncLocalStorage<number>();

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** True when `err` (or its cause) is the address policy refusing a destination, not a network failure. */
export function isPolicyRefusal(err: unknown): boolean {
  return err instanceof OutboundRefused || (err instanceof Error && err.cause instanceof OutboundRefused);
}

/**
 * A dns.lookup for net.connect that checks every address a name resolves to, with the port being connected
 * to (guardConnector provides it), before any connection is opened: a refused name is never connected to.
 */
export function createGuardedLookup(policy: AddressPolicy, lookup?: LookupFunction) {
  const resolve: LookupFunction = lookup ?? ((hostname, options, callback) => dns.lookup(hostname, options, callback));
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    const family = options.family === 4 || options.family === 6 ? options.family : undefined;
    // Unknown port (not through guardConnector): only the allow entries without a port apply.
    const port = connectingPort.getStore();
    resolve(hostname, { all: true, ...(family ? { family } : {}) }, (err, addresses) => {
      if (err) return callback(err, []);
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), []);
      if (!policy.hostAllowed(hostname, port)) {
        for (const a of addresses) {
          if (policy.refusal(a.address, port) !== null) return callback(new OutboundRefused(`${hostname} resolves to ${a.address}, a private or reserved address`), []);
        }
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * Wraps a connector so that every new connection is checked against the policy by the address the
 * socket is actually connected to: the check no spelling of a host, DNS answer or proxy can dodge.
 */
export function guardConnector(connect: BuildConnector.connector, policy: AddressPolicy): BuildConnector.connector {
  return (options, callback) => {
    const port = options.port === undefined || options.port === "" ? (options.protocol === "https:" ? 443 : 80) : Number(options.port);
    // The lookup inside connect() reads the port from here (dns.lookup itself is never told it).
    connectingPort.run(port, () =>
      connect(options, (err, socket) => {
        if (err !== null) return callback(err, null);
        const refusal = connectionRefusal(policy, options.hostname, socket);
        if (refusal !== null) {
          socket.destroy();
          return callback(new OutboundRefused(`connection to ${options.hostname} refused: ${refusal}`), null);
        }
        callback(null, socket);
      }),
    );
  };
}

/** The port a URL connects to: its own, else its scheme's. */
export function portOf(url: URL): number {
  return url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
}

/** An outbound failure in one line: the policy's refusal as it was said, else the error and its code. */
export function describeOutboundError(err: unknown): string {
  if (err instanceof OutboundRefused) return err.message;
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const cause = err.cause instanceof OutboundRefused ? err.cause.message : null;
    if (cause !== null) return cause;
    return code !== undefined && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}
