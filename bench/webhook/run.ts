// Webhook benchmark (issue 4): deliveries per second and p50/p99 latency at 32 connections through the real
// app, with the Stripe-style plugin in the sandbox —
//   · pushInvoice on distinct pending invoices, SQLite and PostgreSQL;
//   · the ignore path, against the same route with the plugin logic in plain TypeScript (target ≥ 0.5×).
// Servers run in child processes, autocannon here; rounds alternate and medians are reported.
//   node bench/webhook/run.ts [--rounds 3] [--duration 5] [--connections 32] [--dialects sqlite,postgres]
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { eventBody, stripeSignature } from "./plugin.ts";
import type { WebhookServerReady } from "./server.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    dialects: { type: "string", default: "sqlite,postgres" },
    invoices: { type: "string", default: "60000" },
  },
});
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const connections = Number(args.connections);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

async function startServer(dialect: string, mode: string, invoices: number): Promise<{ child: ChildProcess; ready: WebhookServerReady }> {
  const child = fork(path.join(HERE, "server.ts"), ["--dialect", dialect, "--mode", mode, "--invoices", String(invoices)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const [ready] = (await once(child, "message")) as [WebhookServerReady];
  return { child, ready };
}

interface Sample {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

async function load(port: number, storeId: string, nextBody: () => string): Promise<Sample> {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/api/paymentPlugins?pluginName=stripe&storeId=${storeId}`,
    connections,
    duration,
    method: "POST",
    requests: [
      {
        setupRequest: (req) => {
          const body = nextBody();
          return { ...req, body, headers: { "content-type": "application/json", "stripe-signature": stripeSignature(body) } };
        },
      },
    ],
  });
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const summarize = (samples: Sample[]) => ({
  rps: Math.round(median(samples.map((s) => s.rps))),
  p50: median(samples.map((s) => s.p50)),
  p99: median(samples.map((s) => s.p99)),
  non2xx: samples.reduce((a, s) => a + s.non2xx, 0),
  rounds: samples.map((s) => Math.round(s.rps)),
});

const dialects = args.dialects.split(",").filter(Boolean);
const results: Record<string, ReturnType<typeof summarize>> = {};
const servers: ChildProcess[] = [];
try {
  // The ignore path: sandbox vs plain TypeScript, same route, lookups and delivery record (SQLite).
  log("starting ignore-path servers (lua, ts) on sqlite");
  const lua = await startServer("sqlite", "lua", 0);
  const ts = await startServer("sqlite", "ts", 0);
  servers.push(lua.child, ts.child);
  const ignoreBody = eventBody("customer.created", "none");
  const ignore: Record<string, Sample[]> = { lua: [], ts: [] };
  for (const s of [lua, ts]) await load(s.ready.port, s.ready.storeId, () => ignoreBody); // warm-up, not counted
  for (let r = 0; r < rounds; r++) {
    for (const [name, s] of [["lua", lua], ["ts", ts]] as const) {
      const sample = await load(s.ready.port, s.ready.storeId, () => ignoreBody);
      ignore[name]!.push(sample);
      log(`ignore ${name} round ${r + 1}: ${Math.round(sample.rps)} req/s p99 ${sample.p99} ms non2xx ${sample.non2xx}`);
    }
  }
  results["ignore, sandboxed Lua (sqlite)"] = summarize(ignore.lua!);
  results["ignore, plain TypeScript (sqlite)"] = summarize(ignore.ts!);
  for (const s of [lua, ts]) {
    s.child.disconnect();
    await once(s.child, "exit");
  }

  // pushInvoice on distinct pending invoices, each dialect.
  for (const dialect of dialects) {
    log(`starting push server on ${dialect} with ${args.invoices} pending invoices`);
    const s = await startServer(dialect, "lua", Number(args.invoices));
    servers.push(s.child);
    let next = 0;
    const samples: Sample[] = [];
    for (let r = 0; r < rounds; r++) {
      const sample = await load(s.ready.port, s.ready.storeId, () => eventBody("payment_intent.succeeded", s.ready.invoiceIds[next++ % s.ready.invoiceIds.length]!));
      samples.push(sample);
      log(`push ${dialect} round ${r + 1}: ${Math.round(sample.rps)} req/s p99 ${sample.p99} ms non2xx ${sample.non2xx} (used ${next} invoices)`);
    }
    if (next > s.ready.invoiceIds.length) log(`WARNING: ran out of distinct invoices on ${dialect}; raise --invoices`);
    results[`pushInvoice, distinct invoices (${dialect})`] = summarize(samples);
    s.child.disconnect();
    await once(s.child, "exit");
  }
} finally {
  for (const c of servers) if (c.exitCode === null) c.kill();
}

const ratio = results["ignore, sandboxed Lua (sqlite)"]!.rps / results["ignore, plain TypeScript (sqlite)"]!.rps;
const report = {
  date: new Date().toISOString(),
  machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, node ${process.version}`,
  settings: { rounds, duration, connections },
  results,
  ignoreRatio: Math.round(ratio * 100) / 100,
};
mkdirSync(path.join(HERE, "results"), { recursive: true });
writeFileSync(path.join(HERE, "results", "latest.json"), JSON.stringify(report, null, 2) + "\n");
console.log("| case | median req/s | p50 ms | p99 ms | rounds (req/s) | non-2xx |\n|---|---|---|---|---|---|");
for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.rounds.join(", ")} | ${r.non2xx} |`);
console.log(`\nignore path, sandbox / plain TypeScript: ${report.ignoreRatio}× (target ≥ 0.5×)`);
