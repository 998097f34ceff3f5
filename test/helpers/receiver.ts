// A webhook receiver on loopback for the events tests: records every request, verifies each with the
// official `standardwebhooks` library, and can be told to answer 2xx, an error status, hang, or be down.
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Webhook } from "standardwebhooks";

export type ReceiverMode = { kind: "ok" } | { kind: "status"; status: number; body?: Buffer } | { kind: "hang" };

export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  contentType: string;
  /** The storefront-version header: the API version the event is rendered in. */
  version: string | undefined;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Requests held open by `hang` and not yet given up by their sender. */
  hanging: number;
  mode: ReceiverMode;
  /** The ids whose signature verified with `secret` (standardwebhooks), in arrival order. */
  verifiedWith(secret: string): string[];
  /** Resolves when `n` requests have arrived (any answer). */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  /** Stops listening (later attempts see connection refused); start() listens again on the same port. */
  down(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  let server: http.Server | null = null;
  const sockets = new Set<Socket>();
  const waiters: { n: number; resolve: () => void }[] = [];
  const r: Receiver = {
    url: "",
    port,
    received: [],
    hanging: 0,
    mode: { kind: "ok" },
    verifiedWith(secret) {
      const wh = new Webhook(secret);
      return r.received
        .filter((m) => {
          try {
            wh.verify(m.body, { "webhook-id": m.id, "webhook-timestamp": m.timestamp, "webhook-signature": m.signature });
            return true;
          } catch {
            return false;
          }
        })
        .map((m) => m.id);
    },
    waitFor(n, timeoutMs = 10_000) {
      if (r.received.length >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${r.received.length} of ${n} requests in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    async start() {
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          r.received.push({
            id: String(req.headers["webhook-id"]),
            timestamp: String(req.headers["webhook-timestamp"]),
            signature: String(req.headers["webhook-signature"]),
            contentType: String(req.headers["content-type"]),
            version: req.headers["storefront-version"] as string | undefined,
            body: Buffer.concat(chunks).toString("utf8"),
            at: Date.now(),
          });
          for (const w of [...waiters]) {
            if (r.received.length < w.n) continue;
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
          const mode = r.mode;
          if (mode.kind === "hang") {
            // Never answers: held until the sender gives up and closes the connection.
            r.hanging++;
            res.once("close", () => r.hanging--);
            return;
          }
          res.writeHead(mode.kind === "ok" ? 200 : mode.status, { "content-type": "text/plain" });
          res.end(mode.kind === "ok" ? "thanks" : (mode.body ?? `status ${mode.status} from the test receiver`));
        });
      });
      server.on("connection", (s) => {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
      });
      server.listen(r.port, "127.0.0.1");
      await once(server, "listening");
      r.port = (server.address() as AddressInfo).port;
      r.url = `http://127.0.0.1:${r.port}/hooks`;
    },
    async down() {
      if (server === null) return;
      const s = server;
      server = null;
      for (const sock of sockets) sock.destroy();
      s.close();
      await once(s, "close");
    },
    close: () => r.down(),
  };
  await r.start();
  return r;
}
