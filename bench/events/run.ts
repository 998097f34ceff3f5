// Events benchmark (issue 13), through the real app with its dispatcher running and a receiver on loopback
// that verifies every delivery with the official `standardwebhooks` library:
//   · pushInvoice throughput with one endpoint subscribed vs none, servers side by side, rounds alternated
//     (target ≥ 0.8×);
//   · events delivered per second while that load runs, and the latency from the webhook's answer (the
//     200 the provider gets) to the receiver's receipt of the invoice.completed event, p50 / p99;
// on SQLite and PostgreSQL.
//   node bench/events/run.ts [--rounds 3] [--duration 5] [--connections 32] [--dialects sqlite,postgres]
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { eventBody, stripeSignature } from "../webhook/plugin.ts";
import type { ReceiverMessage } from "./receiver.ts";
import type { EventsServerReady } from "./server.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    dialects: { type: "string", default: "sqlite,postgres" },
    invoices: { type: "string", default: "25000" },
  },
});
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const connections = Number(args.connections);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

// The receiver runs in its own process; arrivals come back as absolute times (ms, high resolution).
const absoluteNow = () => performance.timeOrigin + performance.now();
const arrivals = new Map<string, number>();
let received = 0;
let verified = 0;
let unverified = 0;
const receiver = fork(path.join(HERE, "receiver.ts"), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
const [hello] = (await once(receiver, "message")) as [ReceiverMessage];
if (hello.kind !== "ready") throw new Error("receiver did not start");
const receiverUrl = hello.url;
receiver.on("message", (m: ReceiverMessage) => {
  if (m.kind !== "arrivals") return;
  for (const [id, at] of m.arrivals) if (!arrivals.has(id)) arrivals.set(id, at);
  received = m.received;
  verified = m.verified;
  unverified = m.unverified;
});

async function startServer(dialect: string, endpoint: string, invoices: number): Promise<{ child: ChildProcess; ready: EventsServerReady }> {
  const child = fork(path.join(HERE, "server.ts"), ["--dialect", dialect, "--endpoint", endpoint, "--invoices", String(invoices)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  // A server that dies while starting must stop the run, not hang it.
  const ready = await Promise.race([
    once(child, "message").then(([m]) => m as EventsServerReady),
    once(child, "exit").then(([code]) => Promise.reject(new Error(`${dialect} server exited with ${String(code)} before it was ready`))),
  ]);
  return { child, ready };
}

async function cpuMs(child: ChildProcess): Promise<number> {
  child.send({ kind: "cpu" });
  for (;;) {
    const [m] = (await once(child, "message")) as [{ kind: string; ms: number }];
    if (m.kind === "cpu") return m.ms;
  }
}

interface Sample {
  cpuPerRequestMs?: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

async function load(s: EventsServerReady, next: () => string, answered?: Map<string, number>, seconds = duration, overallRate?: number): Promise<Sample> {
  const result = await autocannon({
    ...(overallRate ? { overallRate } : {}),
    url: `http://127.0.0.1:${s.port}/api/paymentPlugins?pluginName=stripe&storeId=${s.storeId}`,
    connections,
    duration: seconds,
    method: "POST",
    requests: [
      {
        setupRequest: (req) => {
          const body = eventBody("payment_intent.succeeded", next());
          return { ...req, body, headers: { "content-type": "application/json", "stripe-signature": stripeSignature(body) } };
        },
        onResponse: (status, body) => {
          if (answered && status === 200) answered.set((JSON.parse(body) as { invoiceId: string }).invoiceId, absoluteNow());
        },
      },
    ],
  });
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const round1 = (x: number) => Math.round(x * 10) / 10;

const results: Record<string, unknown> = {};
const lines: string[] = [];
const servers: ChildProcess[] = [];
try {
  for (const dialect of args.dialects.split(",").filter(Boolean)) {
    log(`starting ${dialect} servers (none, one endpoint), ${args.invoices} pending invoices each`);
    const none = await startServer(dialect, "none", Number(args.invoices));
    const one = await startServer(dialect, receiverUrl, Number(args.invoices));
    servers.push(none.child, one.child);
    receiver.send({ secret: one.ready.secret! });
    const cursor = { none: 0, one: 0 };
    const nextNone = () => none.ready.invoiceIds[cursor.none++ % none.ready.invoiceIds.length]!;
    const nextOne = () => one.ready.invoiceIds[cursor.one++ % one.ready.invoiceIds.length]!;
    // Warm-up, not counted.
    await load(none.ready, nextNone, undefined, 2);
    await load(one.ready, nextOne, new Map(), 2);
    const samples: { none: Sample[]; one: Sample[] } = { none: [], one: [] };
    const latencies: number[] = [];
    const deliveredPerSecond: number[] = [];
    let missing = 0;
    for (let r = 0; r < rounds; r++) {
      // Alternate which side goes first so drift in the machine's load hits both.
      const order = r % 2 === 0 ? (["none", "one"] as const) : (["one", "none"] as const);
      for (const side of order) {
        if (side === "none") {
          const cpu0 = await cpuMs(none.child);
          const s = await load(none.ready, nextNone);
          s.cpuPerRequestMs = ((await cpuMs(none.child)) - cpu0) / (s.rps * duration);
          samples.none.push(s);
          log(`${dialect} none round ${r + 1}: ${Math.round(s.rps)} req/s p99 ${s.p99} ms non2xx ${s.non2xx}`);
          continue;
        }
        const answered = new Map<string, number>();
        const before = arrivals.size;
        const cpu0 = await cpuMs(one.child);
        const start = absoluteNow();
        const s = await load(one.ready, nextOne, answered);
        const end = absoluteNow();
        // Let the queue drain (bounded), then match answers with receipts.
        const deadline = performance.now() + 10_000;
        while ([...answered.keys()].some((id) => !arrivals.has(id)) && performance.now() < deadline) await new Promise((res) => setTimeout(res, 50));
        let inWindow = 0;
        for (const [id, t] of answered) {
          const got = arrivals.get(id);
          if (got === undefined) missing++;
          else {
            latencies.push(got - t);
            if (got <= end) inWindow++;
          }
        }
        deliveredPerSecond.push(inWindow / ((end - start) / 1000));
        // The queue drained above, so this CPU includes sending every event of the round.
        s.cpuPerRequestMs = ((await cpuMs(one.child)) - cpu0) / (s.rps * duration);
        samples.one.push(s);
        log(`${dialect} one round ${r + 1}: ${Math.round(s.rps)} req/s p99 ${s.p99} ms, delivered ${Math.round(deliveredPerSecond.at(-1)!)}/s during the round, ${arrivals.size - before} events`);
      }
    }
    // Below saturation: at half the no-endpoint throughput the queue stays short, so the latency is the
    // dispatcher's own (claim, sign, send), not a backlog's.
    const rate = Math.max(1, Math.round(median(samples.none.map((s) => s.rps)) / 2));
    const halfAnswered = new Map<string, number>();
    const half = await load(one.ready, nextOne, halfAnswered, duration, rate);
    const halfDeadline = performance.now() + 10_000;
    while ([...halfAnswered.keys()].some((id) => !arrivals.has(id)) && performance.now() < halfDeadline) await new Promise((res) => setTimeout(res, 50));
    const halfLatencies = [...halfAnswered].flatMap(([id, t]) => (arrivals.has(id) ? [arrivals.get(id)! - t] : []));
    log(`${dialect} one at ${rate} req/s: answer -> receipt p50 ${round1(quantile(halfLatencies, 0.5))} ms p99 ${round1(quantile(halfLatencies, 0.99))} ms; the webhook's own latency p50 ${half.p50} ms p99 ${half.p99} ms`);
    if (cursor.none > none.ready.invoiceIds.length || cursor.one > one.ready.invoiceIds.length) log(`WARNING: ran out of distinct invoices on ${dialect}; raise --invoices`);
    const rpsNone = median(samples.none.map((s) => s.rps));
    const rpsOne = median(samples.one.map((s) => s.rps));
    const r = {
      pushInvoiceNone: { rps: Math.round(rpsNone), rounds: samples.none.map((s) => Math.round(s.rps)), non2xx: samples.none.reduce((a, s) => a + s.non2xx, 0) },
      pushInvoiceOneEndpoint: { rps: Math.round(rpsOne), rounds: samples.one.map((s) => Math.round(s.rps)), non2xx: samples.one.reduce((a, s) => a + s.non2xx, 0) },
      ratio: Math.round((rpsOne / rpsNone) * 100) / 100,
      // Each round's two sides ran next to each other: their ratio is less exposed to drift in the machine's load.
      cpuPerPaymentMs: {
        none: Math.round(median(samples.none.map((x) => x.cpuPerRequestMs!)) * 100) / 100,
        oneEndpoint: Math.round(median(samples.one.map((x) => x.cpuPerRequestMs!)) * 100) / 100,
      },
      pairedRatioMedian: Math.round(median(samples.one.map((o, i) => o.rps / samples.none[i]!.rps)) * 100) / 100,
      eventsDeliveredPerSecond: { median: Math.round(median(deliveredPerSecond)), rounds: deliveredPerSecond.map(Math.round) },
      answerToReceiptMs: { p50: round1(quantile(latencies, 0.5)), p99: round1(quantile(latencies, 0.99)), n: latencies.length },
      answerToReceiptAtHalfLoadMs: { rate, p50: round1(quantile(halfLatencies, 0.5)), p99: round1(quantile(halfLatencies, 0.99)), n: halfLatencies.length, webhookLatencyP50: half.p50, webhookLatencyP99: half.p99 },
      notReceivedWithin10s: missing,
    };
    results[dialect] = r;
    lines.push(
      `| ${dialect} | ${r.pushInvoiceNone.rps} (${r.pushInvoiceNone.rounds.join(", ")}) | ${r.pushInvoiceOneEndpoint.rps} (${r.pushInvoiceOneEndpoint.rounds.join(", ")}) | **${r.ratio}×** (paired ${r.pairedRatioMedian}×) | ${r.cpuPerPaymentMs.none} / ${r.cpuPerPaymentMs.oneEndpoint} (${Math.round((r.cpuPerPaymentMs.none / r.cpuPerPaymentMs.oneEndpoint) * 100) / 100}×) | ${r.eventsDeliveredPerSecond.median} | ${r.answerToReceiptMs.p50} / ${r.answerToReceiptMs.p99} | ${r.answerToReceiptAtHalfLoadMs.rate} | ${r.answerToReceiptAtHalfLoadMs.p50} / ${r.answerToReceiptAtHalfLoadMs.p99} | ${missing} |`,
    );
    for (const s of [none, one]) {
      s.child.disconnect();
      await once(s.child, "exit");
    }
  }
} finally {
  for (const c of servers) if (c.exitCode === null) c.kill();
  receiver.disconnect();
}

const report = {
  date: new Date().toISOString(),
  machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, node ${process.version}`,
  settings: { rounds, duration, connections, invoices: Number(args.invoices) },
  received,
  verifiedSample: verified,
  unverified,
  results,
};
mkdirSync(path.join(HERE, "results"), { recursive: true });
writeFileSync(path.join(HERE, "results", "latest.json"), JSON.stringify(report, null, 2) + "\n");
console.log("| dialect | pushInvoice req/s, no endpoint (rounds) | one endpoint (rounds) | one / none | server CPU ms per payment, none / one (ratio) | events delivered/s at full load | answer → receipt p50 / p99 ms at full load | half load req/s | answer → receipt p50 / p99 ms at half load | not received in 10 s |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const l of lines) console.log(l);
console.log(`\n${received} deliveries received; of every tenth, ${verified} verified with standardwebhooks and ${unverified} failed`);
