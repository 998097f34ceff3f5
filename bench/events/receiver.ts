// The events benchmark's webhook receiver, in its own process so that its work is not counted against the
// load generator's: records when each invoice's event arrived (absolute high-resolution time, comparable
// across processes), verifies one delivery in ten with the official `standardwebhooks` library, and reports
// to run.ts over IPC every 50 ms.
//   (forked by run.ts) node bench/events/receiver.ts
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { Webhook } from "standardwebhooks";

export type ReceiverMessage = { kind: "ready"; url: string } | { kind: "arrivals"; arrivals: [string, number][]; received: number; verified: number; unverified: number };

const absoluteNow = () => performance.timeOrigin + performance.now();
let verifier: Webhook | null = null;
let pending: [string, number][] = [];
let received = 0;
let verified = 0;
let unverified = 0;

process.on("message", (m: { secret: string }) => {
  verifier = new Webhook(m.secret);
});

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const at = absoluteNow();
    const body = Buffer.concat(chunks).toString("utf8");
    received++;
    const invoiceId = /"invoice":\{"id":"([^"]+)"/.exec(body)?.[1];
    if (invoiceId !== undefined) pending.push([invoiceId, at]);
    if (received % 10 === 0 && verifier !== null) {
      try {
        verifier.verify(body, req.headers as Record<string, string>);
        verified++;
      } catch {
        unverified++;
      }
    }
    res.writeHead(204).end();
  });
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
setInterval(() => {
  if (pending.length === 0) return;
  process.send!({ kind: "arrivals", arrivals: pending, received, verified, unverified } satisfies ReceiverMessage);
  pending = [];
}, 50);
process.on("disconnect", () => process.exit(0));
process.send!({ kind: "ready", url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks` } satisfies ReceiverMessage);
