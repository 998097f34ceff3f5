// Webhook benchmark (issue 4): deliveries per second and p50/p99 latency at 32 connections through the real
// app, with the Stripe-style plugin in the sandbox —
//   · pushInvoice on distinct pending invoices, SQLite and PostgreSQL;
//   · the ignore path, against the same route with the plugin logic in plain TypeScript (target ≥ 0.5×);
//   · with --baseline DIR (a checkout of an earlier commit, with its node_modules), the same cases served by
//     that checkout side by side in the same run: what this version's money path costs (durable commits,
//     once-per-event claims) against the one before it.
// Servers run in child processes, autocannon here; rounds alternate and medians are reported.
//   node bench/webhook/run.ts [--rounds 3] [--duration 5] [--connections 32] [--dialects sqlite,postgres] [--baseline DIR]
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
    baseline: { type: "string" },
  },
});
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const connections = Number(args.connections);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

async function startServer(dialect: string, mode: string, invoices: number, root?: string): Promise<{ child: ChildProcess; ready: WebhookServerReady }> {
  const script = root === undefined ? path.join(HERE, "server.ts") : path.join(path.resolve(root), "bench", "webhook", "server.ts");
  const child = fork(script, ["--dialect", dialect, "--mode", mode, "--invoices", String(invoices)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    ...(root === undefined ? {} : { cwd: path.resolve(root) }),
  });
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
  // The ignore path: sandbox vs plain TypeScript (and the baseline's sandbox), same route, lookups and delivery record (SQLite).
  log("starting ignore-path servers on sqlite");
  const ignoreServers: [string, Awaited<ReturnType<typeof startServer>>][] = [
    ["ignore, sandboxed Lua (sqlite)", await startServer("sqlite", "lua", 0)],
    ["ignore, plain TypeScript (sqlite)", await startServer("sqlite", "ts", 0)],
  ];
  if (args.baseline) ignoreServers.push(["ignore, sandboxed Lua, baseline (sqlite)", await startServer("sqlite", "lua", 0, args.baseline)]);
  servers.push(...ignoreServers.map(([, s]) => s.child));
  const ignoreBody = eventBody("customer.created", "none");
  const ignore = new Map<string, Sample[]>(ignoreServers.map(([name]) => [name, []]));
  for (const [, s] of ignoreServers) await load(s.ready.port, s.ready.storeId, () => ignoreBody); // warm-up, not counted
  for (let r = 0; r < rounds; r++) {
    for (const [name, s] of ignoreServers) {
      const sample = await load(s.ready.port, s.ready.storeId, () => ignoreBody);
      ignore.get(name)!.push(sample);
      log(`${name} round ${r + 1}: ${Math.round(sample.rps)} req/s p99 ${sample.p99} ms non2xx ${sample.non2xx}`);
    }
  }
  for (const [name, samples] of ignore) results[name] = summarize(samples);
  for (const [, s] of ignoreServers) {
    s.child.disconnect();
    await once(s.child, "exit");
  }

  // pushInvoice on distinct pending invoices, each dialect (this version and the baseline in alternate rounds).
  for (const dialect of dialects) {
    log(`starting push server(s) on ${dialect} with ${args.invoices} pending invoices`);
    const pushServers: [string, Awaited<ReturnType<typeof startServer>>][] = [[`pushInvoice, distinct invoices (${dialect})`, await startServer(dialect, "lua", Number(args.invoices))]];
    if (args.baseline) pushServers.push([`pushInvoice, distinct invoices, baseline (${dialect})`, await startServer(dialect, "lua", Number(args.invoices), args.baseline)]);
    servers.push(...pushServers.map(([, s]) => s.child));
    const next = new Map<string, number>(pushServers.map(([name]) => [name, 0]));
    const samples = new Map<string, Sample[]>(pushServers.map(([name]) => [name, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [name, s] of pushServers) {
        const sample = await load(s.ready.port, s.ready.storeId, () => {
          const i = next.get(name)!;
          next.set(name, i + 1);
          return eventBody("payment_intent.succeeded", s.ready.invoiceIds[i % s.ready.invoiceIds.length]!);
        });
        samples.get(name)!.push(sample);
        log(`${name} round ${r + 1}: ${Math.round(sample.rps)} req/s p99 ${sample.p99} ms non2xx ${sample.non2xx} (used ${next.get(name)} invoices)`);
      }
    }
    for (const [name, s] of pushServers) {
      if (next.get(name)! > s.ready.invoiceIds.length) log(`WARNING: ran out of distinct invoices for ${name}; raise --invoices`);
      results[name] = summarize(samples.get(name)!);
      s.child.disconnect();
      await once(s.child, "exit");
    }
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
  ...(args.baseline ? { versusBaseline: versusBaseline() } : {}),
};
mkdirSync(path.join(HERE, "results"), { recursive: true });
writeFileSync(path.join(HERE, "results", "latest.json"), JSON.stringify(report, null, 2) + "\n");
console.log("| case | median req/s | p50 ms | p99 ms | rounds (req/s) | non-2xx |\n|---|---|---|---|---|---|");
for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.rounds.join(", ")} | ${r.non2xx} |`);
console.log(`\nignore path, sandbox / plain TypeScript: ${report.ignoreRatio}× (target ≥ 0.5×)`);
if (report.versusBaseline) for (const [name, r] of Object.entries(report.versusBaseline)) console.log(`${name}, this version / baseline: ${r}×`);

/** Each case's median req/s over the baseline's, measured in the same run. */
function versusBaseline(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, r] of Object.entries(results)) {
    const base = results[name.replace(/ \(/, ", baseline (")];
    if (!name.includes("baseline") && base) out[name] = Math.round((r.rps / base.rps) * 100) / 100;
  }
  return out;
}
