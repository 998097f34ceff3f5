// Isolation benchmark (issue 12.1): does a payment webhook wait because someone is reading customers?
// Signed `ignore` webhooks to the catalogue's generic-hmac plugin, paced at 50/s (one every 20 ms, sent on
// schedule whether or not the previous one answered), on a store with 20,000 seeded customers: alone, and
// while 16 connections read `/customers?limit=100` as fast as they are answered. Phases alternate in one
// run (alone, readers, alone, readers, …) so a noisy neighbour hits both; medians of the rounds' p50/p99.
//   node bench/isolation/run.ts [--dialects sqlite,postgres] [--customers 20000] [--rounds 3] [--seconds 10]
//     [--readers 16] [--rate 50] [--read-threads N]  (READ_THREADS of the server; 0 = pages on the main thread)
//     [--read-threads-nice N]  (READ_THREADS_NICE of the server; its default otherwise)
import { type ChildProcess, fork } from "node:child_process";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import type { ReadersResult } from "./readers.ts";
import { type IsolationServerReady, SIGNING_SECRET } from "./protocol.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    dialects: { type: "string", default: "sqlite,postgres" },
    customers: { type: "string", default: "20000" },
    rounds: { type: "string", default: "3" },
    seconds: { type: "string", default: "10" },
    readers: { type: "string", default: "16" },
    rate: { type: "string", default: "50" },
    "read-threads": { type: "string" },
    "read-threads-nice": { type: "string" },
  },
});
const rounds = Number(args.rounds);
const seconds = Number(args.seconds);
const interval = 1000 / Number(args.rate);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

const BODY = JSON.stringify({ type: "payment.pending", status: "processing" });
const SIGNATURE = createHmac("sha256", SIGNING_SECRET).update(BODY).digest("hex");

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Webhooks on schedule for `seconds`; the latency of each, from its send to its whole answer. */
async function pacedWebhooks(pool: Pool, ready: IsolationServerReady): Promise<{ p50: number; p99: number; n: number; failed: number }> {
  const latencies: number[] = [];
  let failed = 0;
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  const count = Math.round((seconds * 1000) / interval);
  for (let i = 0; i < count; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sent = performance.now();
    inFlight.push(
      pool
        .request({
          method: "POST",
          path: `/api/paymentPlugins?pluginName=generic-hmac&storeId=${ready.storeId}`,
          headers: { "content-type": "application/json", "x-signature": SIGNATURE },
          body: BODY,
        })
        .then(async (res) => {
          await res.body.text();
          if (res.statusCode !== 200) failed++;
          latencies.push(performance.now() - sent);
        }),
    );
  }
  await Promise.all(inFlight);
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), n: latencies.length, failed };
}

async function startReaders(ready: IsolationServerReady, duration: number): Promise<{ child: ChildProcess; result: Promise<ReadersResult> }> {
  const child = fork(path.join(HERE, "readers.ts"), [
    "--url", `http://127.0.0.1:${ready.port}`, "--key", ready.key, "--connections", args.readers, "--duration", String(duration),
  ]);
  const result = once(child, "message").then(([m]) => m as ReadersResult);
  return { child, result };
}

const results: Record<string, unknown> = {};
for (const dialect of args.dialects.split(",")) {
  log(`${dialect}: starting the server (seeds ${args.customers} customers on first use) …`);
  const server = fork(path.join(HERE, "server.ts"), [
    "--dialect", dialect, "--customers", args.customers, ...(args["read-threads"] === undefined ? [] : ["--read-threads", args["read-threads"]]),
    ...(args["read-threads-nice"] === undefined ? [] : ["--read-threads-nice", args["read-threads-nice"]]),
  ]);
  const [ready] = (await once(server, "message")) as [IsolationServerReady];
  log(`${dialect}: ready on port ${ready.port}, ${ready.readThreads} reader threads`);
  const pool = new Pool(`http://127.0.0.1:${ready.port}`, { connections: 8 });
  await pacedWebhooks(pool, ready); // warm-up: JIT, caches, the plugin's first runs
  const alone: { p50: number; p99: number }[] = [];
  const loaded: { p50: number; p99: number }[] = [];
  const readers: ReadersResult[] = [];
  for (let r = 0; r < rounds; r++) {
    const a = await pacedWebhooks(pool, ready);
    alone.push(a);
    log(`${dialect} round ${r + 1}: alone        webhook p50 ${a.p50.toFixed(1)} ms, p99 ${a.p99.toFixed(1)} ms (${a.n} sent, ${a.failed} failed)`);
    const rd = await startReaders(ready, seconds + 2);
    await new Promise((res) => setTimeout(res, 1000)); // the readers reach full speed
    const b = await pacedWebhooks(pool, ready);
    const reader = await rd.result;
    loaded.push(b);
    readers.push(reader);
    log(
      `${dialect} round ${r + 1}: with readers webhook p50 ${b.p50.toFixed(1)} ms, p99 ${b.p99.toFixed(1)} ms (${b.n} sent, ${b.failed} failed); ` +
        `readers ${reader.rps.toFixed(0)} pages/s, p50 ${reader.p50} ms, p99 ${reader.p99} ms, ${reader.non2xx} failed`,
    );
  }
  await pool.close();
  server.disconnect();
  await once(server, "exit");
  const summary = {
    readThreads: ready.readThreads,
    alone: { p50: median(alone.map((x) => x.p50)), p99: median(alone.map((x) => x.p99)) },
    withReaders: { p50: median(loaded.map((x) => x.p50)), p99: median(loaded.map((x) => x.p99)) },
    readers: { pagesPerSecond: median(readers.map((x) => x.rps)), p50: median(readers.map((x) => x.p50)), p99: median(readers.map((x) => x.p99)) },
    rounds: { alone, withReaders: loaded, readers },
  };
  const ratio = { p50: summary.withReaders.p50 / summary.alone.p50, p99: summary.withReaders.p99 / summary.alone.p99 };
  log(
    `${dialect}: webhook p50 ${summary.alone.p50.toFixed(1)} → ${summary.withReaders.p50.toFixed(1)} ms (${ratio.p50.toFixed(2)}×, target ≤ 2×), ` +
      `p99 ${summary.alone.p99.toFixed(1)} → ${summary.withReaders.p99.toFixed(1)} ms (${ratio.p99.toFixed(2)}×, target ≤ 3×)`,
  );
  results[dialect] = { ...summary, ratio };
}

const out = path.join(HERE, "results");
mkdirSync(out, { recursive: true });
const variant = `${args["read-threads"] === undefined ? "" : `-read-threads-${args["read-threads"]}`}${args["read-threads-nice"] === undefined ? "" : `-nice-${args["read-threads-nice"]}`}`;
const file = path.join(out, `latest${variant}.json`);
writeFileSync(
  file,
  JSON.stringify({ when: new Date().toISOString(), machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}`, node: process.version, args, results }, null, 2) + "\n",
);
log(`results: ${path.relative(process.cwd(), file)}`);
