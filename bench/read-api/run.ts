// Read API benchmark (issue 2): GET …/customers and GET …/invoices with limit=100 — plain, with a date window
// and with `id` filters — on 100,000 and 1,000,000 seeded customers, each against a route that sends the
// same page from memory through the same response schema. The server runs in a child process, autocannon
// (32 connections) here; rounds are interleaved and medians reported because the machine is shared.
//
//   node bench/read-api/run.ts [--sizes 100000,1000000] [--dialect sqlite|postgres] [--rounds 3] [--duration 5]
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { type BenchDialect, type Dataset, databaseUrl, ensureDataset } from "./dataset.ts";
import { type BenchCase, type ServerReady, type ServerRequest, memoryPath } from "./server.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));

const { values: args } = parseArgs({
  options: {
    sizes: { type: "string", default: "100000,1000000" },
    dialect: { type: "string", default: "sqlite" },
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "32" },
    cases: { type: "string", default: "" },
  },
});
const sizes = args.sizes.split(",").map((s) => Number(s.replace(/_/g, "")));
const dialect = args.dialect as BenchDialect;
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const warmup = Number(args.warmup);
const connections = Number(args.connections);
if (!["sqlite", "postgres"].includes(dialect) || sizes.some((n) => !Number.isSafeInteger(n) || n < 1)) {
  throw new Error("usage: run.ts [--sizes 100000,1000000] [--dialect sqlite|postgres] [--rounds 3] [--duration 5]");
}

const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

function casesFor(d: Dataset): BenchCase[] {
  const window = { createdAtFrom: d.filters.createdAtFrom, createdAtTo: d.filters.createdAtTo };
  const all: BenchCase[] = [
    { name: "customers", list: "customers", query: { limit: "100" } },
    { name: "customers-window", list: "customers", query: { limit: "100", ...window } },
    { name: "customers-id-variant", list: "customers", query: { limit: "100", id: d.filters.variantId } },
    { name: "invoices", list: "invoices", query: { limit: "100" } },
    { name: "invoices-window", list: "invoices", query: { limit: "100", ...window } },
    { name: "invoices-id-variant", list: "invoices", query: { limit: "100", id: d.filters.variantId } },
    { name: "invoices-id-customer", list: "invoices", query: { limit: "100", id: d.filters.customerId } },
  ];
  const only = args.cases.split(",").filter((s) => s !== "");
  return only.length === 0 ? all : all.filter((c) => only.includes(c.name));
}

interface Sample {
  rps: number;
  p99: number;
  bytesPerRequest: number;
}

async function load(url: string, headers: Record<string, string>, seconds: number): Promise<Sample> {
  const result = await autocannon({ url, connections, duration: seconds, headers, timeout: 60 });
  const failed = result.non2xx + result.errors + result.timeouts;
  if (failed > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  return { rps: result.requests.average, p99: result.latency.p99, bytesPerRequest: result.throughput.total / Math.max(1, result.requests.total) };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function startServer(d: Dataset, cases: BenchCase[]): Promise<{ child: ChildProcess; ready: ServerReady }> {
  const child = fork(path.join(HERE, "server.ts"), [], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl(d),
      LOG_LEVEL: "warn",
      RATE_LIMIT_MAX: "1000000000",
      PLUGIN_POOL_SIZE: "1",
      SECRETS_KEY: "0".repeat(64),
    },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  child.send({ storeId: d.storeId, cases } satisfies ServerRequest);
  const [message] = (await Promise.race([
    once(child, "message"),
    once(child, "exit").then(([code]) => {
      throw new Error(`benchmark server exited with ${String(code)}`);
    }),
  ])) as [ServerReady];
  return { child, ready: message };
}

interface CaseResult {
  name: string;
  path: string;
  elements: number;
  bytes: number;
  list: { rps: number; p99: number; rounds: Sample[] };
  memory: { rps: number; p99: number; rounds: Sample[] };
  ratio: number;
}

async function benchSize(customers: number): Promise<{ dataset: Dataset; cases: CaseResult[] }> {
  const dataset = await ensureDataset(dialect, customers, log);
  const cases = casesFor(dataset);
  const { child, ready } = await startServer(dataset, cases);
  const base = `http://127.0.0.1:${ready.port}`;
  const headers = { authorization: ready.key };
  const urlOf = (c: BenchCase) => `${base}/api/service/${c.list}?${new URLSearchParams(c.query).toString()}`;
  const samples = new Map(cases.map((c) => [c.name, { list: [] as Sample[], memory: [] as Sample[] }]));
  try {
    log(`${customers.toLocaleString("en-US")} customers: warming up (${warmup} s per route) …`);
    for (const c of cases) {
      await load(urlOf(c), headers, warmup);
      await load(base + memoryPath(c), {}, warmup);
    }
    for (let r = 1; r <= rounds; r++) {
      for (const c of cases) {
        const list = await load(urlOf(c), headers, duration);
        const memory = await load(base + memoryPath(c), {}, duration);
        samples.get(c.name)!.list.push(list);
        samples.get(c.name)!.memory.push(memory);
        log(`  round ${r}/${rounds} ${c.name}: list ${list.rps.toFixed(0)} req/s p99 ${list.p99} ms | memory ${memory.rps.toFixed(0)} req/s p99 ${memory.p99} ms`);
      }
    }
  } finally {
    child.kill("SIGTERM");
    if (child.exitCode === null) await once(child, "exit");
  }
  return {
    dataset,
    cases: cases.map((c) => {
      const s = samples.get(c.name)!;
      const list = { rps: median(s.list.map((x) => x.rps)), p99: median(s.list.map((x) => x.p99)), rounds: s.list };
      const memory = { rps: median(s.memory.map((x) => x.rps)), p99: median(s.memory.map((x) => x.p99)), rounds: s.memory };
      return {
        name: c.name,
        path: `/api/service/${c.list}?${new URLSearchParams(c.query).toString()}`,
        elements: ready.pageSizes[c.name] ?? 0,
        bytes: Math.round(median(s.list.map((x) => x.bytesPerRequest))),
        list,
        memory,
        ratio: list.rps / memory.rps,
      };
    }),
  };
}

const started = Date.now();
const results: { customers: number; dataset: Dataset; cases: CaseResult[] }[] = [];
for (const customers of sizes) results.push({ customers, ...(await benchSize(customers)) });

// Markdown for bench/README.md.
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const lines: string[] = [];
lines.push(`| customers | case | elements | KiB | list req/s | list p99 ms | memory req/s | memory p99 ms | list / memory |`);
lines.push(`|---:|---|---:|---:|---:|---:|---:|---:|---:|`);
for (const r of results) {
  for (const c of r.cases) {
    lines.push(
      `| ${fmt(r.customers)} | ${c.name} | ${c.elements} | ${(c.bytes / 1024).toFixed(0)} | ${fmt(c.list.rps)} | ${c.list.p99} | ${fmt(c.memory.rps)} | ${c.memory.p99} | ${c.ratio.toFixed(2)} |`,
    );
  }
}
if (results.length >= 2) {
  const small = results[0]!;
  const big = results[results.length - 1]!;
  lines.push("");
  lines.push(`| case | req/s ${fmt(small.customers)} | req/s ${fmt(big.customers)} | slowdown (req/s) | p99 ms ${fmt(small.customers)} | p99 ms ${fmt(big.customers)} | slowdown (p99) |`);
  lines.push(`|---|---:|---:|---:|---:|---:|---:|`);
  for (const c of small.cases) {
    const b = big.cases.find((x) => x.name === c.name)!;
    lines.push(
      `| ${c.name} | ${fmt(c.list.rps)} | ${fmt(b.list.rps)} | ${(c.list.rps / b.list.rps).toFixed(2)}× | ${c.list.p99} | ${b.list.p99} | ${(b.list.p99 / c.list.p99).toFixed(2)}× |`,
    );
  }
}
process.stdout.write(lines.join("\n") + "\n");

const resultsDir = path.join(HERE, "results");
mkdirSync(resultsDir, { recursive: true });
const report = {
  when: new Date().toISOString(),
  minutes: Math.round((Date.now() - started) / 6000) / 10,
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? "", memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version, loadavg: os.loadavg() },
  settings: { dialect, rounds, duration, warmup, connections },
  results,
};
const file = path.join(resultsDir, `${dialect}-latest.json`);
writeFileSync(file, JSON.stringify(report, null, 2) + "\n");
log(`done in ${report.minutes} min; results in ${path.relative(process.cwd(), file)}`);
