// Read API benchmark (issue 2): GET …/customers and GET …/invoices with limit=100 — plain, with a date window
// and with `id` filters — on 100,000 and 1,000,000 seeded customers, each against a route that sends the
// same page from memory through the same response schema. The server runs in a child process, autocannon
// (32 connections) here; rounds are interleaved and medians reported because the machine is shared.
//
//   node bench/read-api/run.ts [--sizes 100000,1000000] [--dialect sqlite|postgres] [--rounds 3] [--duration 5]
//     [--cases customers,invoices-window] [--sqlite-cache-kib 262144]  (a what-if: larger SQLite page cache)
//     [--pipeline]  (also the page from memory behind the list route's hooks: key, rate limit, query schema)
import { type ChildProcess, execFile, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { type BenchDialect, type Dataset, databaseUrl, ensureDataset } from "./dataset.ts";
import { type BenchCase, type ServerReady, type ServerRequest, memoryPath, pipelinePath } from "./server.ts";

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
    "sqlite-cache-kib": { type: "string", default: "" },
    pipeline: { type: "boolean", default: false },
    client: { type: "string", default: "wrk" },
  },
});
const sizes = args.sizes.split(",").map((s) => Number(s.replace(/_/g, "")));
const dialect = args.dialect as BenchDialect;
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const warmup = Number(args.warmup);
const connections = Number(args.connections);
const client = args.client as "wrk" | "autocannon";
if (!["wrk", "autocannon"].includes(client)) throw new Error("--client is wrk or autocannon");
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
  requests: number;
  /**
   * CPU time of the server process (all its threads, user + system) per request answered: less sensitive to
   * a shared machine than req/s, since time the server waits for the cores is not counted. PostgreSQL's own
   * server processes are not included.
   */
  cpuMsPerRequest?: number;
  /**
   * CPU time of the PostgreSQL server's processes on this machine (all of them, user + system) per request:
   * the database's share of a page, which the figure above leaves out. Only on PostgreSQL, with the server
   * on the benchmark's machine.
   */
  dbCpuMsPerRequest?: number;
}

/** User + system CPU time of a process and all its threads so far, in ms (Linux /proc; CLK_TCK 100). */
function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/**
 * User + system CPU time of every process named `postgres` so far, in ms: each live process's own, plus what
 * its ended children used (the postmaster's count of the backends and workers it reaped), so a process that
 * ends during a run is not subtracted.
 */
function postgresCpuMs(): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) !== "postgres") continue;
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10;
    } catch {
      // the process ended between the listing and the read
    }
  }
  return total;
}

/**
 * Loads one URL for `seconds` with `connections` connections. wrk (C, one thread; Debian's `wrk`) is the
 * default: autocannon parses every response in JavaScript and, on two cores shared with the server, was
 * itself the limit of the large pages (~500 pages of 262 KiB per second whatever the route), so a route
 * faster than that could not show it. `--client autocannon` keeps the earlier runs' client.
 */
async function load(url: string, headers: Record<string, string>, seconds: number): Promise<Sample> {
  return client === "wrk" ? loadWrk(url, headers, seconds) : loadAutocannon(url, headers, seconds);
}

async function loadAutocannon(url: string, headers: Record<string, string>, seconds: number): Promise<Sample> {
  const result = await autocannon({ url, connections, duration: seconds, headers, timeout: 60 });
  const failed = result.non2xx + result.errors + result.timeouts;
  if (failed > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  return { rps: result.requests.average, p99: result.latency.p99, bytesPerRequest: result.throughput.total / Math.max(1, result.requests.total), requests: result.requests.total };
}

const WRK_UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };
const WRK_BYTES: Record<string, number> = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };

async function loadWrk(url: string, headers: Record<string, string>, seconds: number): Promise<Sample> {
  const argv = ["-t1", `-c${connections}`, `-d${seconds}s`, "--timeout", "60s", "--latency"];
  for (const [k, v] of Object.entries(headers)) argv.push("-H", `${k}: ${v}`);
  argv.push(url);
  const out = await new Promise<string>((resolve, reject) =>
    execFile("wrk", argv, { maxBuffer: 1 << 20 }, (err, stdout, stderr) => (err ? reject(new Error(`wrk: ${err.message} ${stderr}`)) : resolve(stdout))),
  );
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const p99 = /\s99%\s+([\d.]+)(us|ms|s|m)\b/.exec(out);
  const total = /(\d+) requests in [\d.]+\w+, ([\d.]+)(B|KB|MB|GB) read/.exec(out);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const failed = non2xx + (errors ? Number(errors[1]) + Number(errors[3]) + Number(errors[4]) : 0);
  if (failed > 0 || !Number.isFinite(rps) || !p99 || !total) throw new Error(`${url}: wrk reported failures or output it could not read:\n${out}`);
  return {
    rps,
    p99: Math.round(Number(p99[1]) * WRK_UNIT_MS[p99[2]!]!),
    bytesPerRequest: (Number(total[2]) * WRK_BYTES[total[3]!]!) / Math.max(1, Number(total[1])),
    requests: Number(total[1]),
  };
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
      // What-if runs only: a larger SQLite page cache than the service's default (KiB).
      ...(args["sqlite-cache-kib"] ? { BENCH_SQLITE_CACHE_KIB: args["sqlite-cache-kib"] } : {}),
    },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  child.send({ storeId: d.storeId, cases, pipeline: args.pipeline } satisfies ServerRequest);
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
  /** With --pipeline: the page from memory behind the list route's hooks. */
  pipeline: { rps: number; p99: number; rounds: Sample[] } | null;
  ratio: number;
  /**
   * Medians of the server's CPU ms per request: list, memory, and memory / list; on PostgreSQL also the
   * database server's CPU ms per list request.
   */
  cpu: { list: number; memory: number; ratio: number; databaseList?: number };
}

interface Target {
  customers: number;
  dataset: Dataset;
  cases: BenchCase[];
  child: ChildProcess;
  ready: ServerReady;
  base: string;
  samples: Map<string, { list: Sample[]; memory: Sample[]; pipeline: Sample[] }>;
}

/**
 * Waits until the server has drained the requests autocannon left in flight (a slow case can leave seconds
 * of queued work behind), so that the next measurement starts on an idle server.
 */
async function settle(base: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  let quick = 0;
  while (quick < 2 && Date.now() < deadline) {
    const t = performance.now();
    await fetch(`${base}/healthz`).then((r) => r.arrayBuffer());
    quick = performance.now() - t < 20 ? quick + 1 : 0;
  }
}

const cpu = (s: Sample) => (s.cpuMsPerRequest ?? Number.NaN).toFixed(2);

const urlOf = (t: Target, c: BenchCase) => `${t.base}/api/service/${c.list}?${new URLSearchParams(c.query).toString()}`;

async function measure(t: Target, c: BenchCase, seconds: number): Promise<{ list: Sample; memory: Sample; pipeline: Sample | null }> {
  const pid = t.child.pid!;
  const timed = async (url: string, headers: Record<string, string>): Promise<Sample> => {
    const before = processCpuMs(pid);
    const dbBefore = dialect === "postgres" ? postgresCpuMs() : 0;
    const sample = await load(url, headers, seconds);
    // Settled: the requests left in flight when the load stopped are answered and counted.
    await settle(t.base);
    const perRequest = (ms: number) => ms / Math.max(1, sample.requests);
    return {
      ...sample,
      cpuMsPerRequest: perRequest(processCpuMs(pid) - before),
      ...(dialect === "postgres" ? { dbCpuMsPerRequest: perRequest(postgresCpuMs() - dbBefore) } : {}),
    };
  };
  const list = await timed(urlOf(t, c), { authorization: t.ready.key });
  const memory = await timed(t.base + memoryPath(c), {});
  const pipeline = args.pipeline ? await timed(t.base + pipelinePath(c), { authorization: t.ready.key }) : null;
  return { list, memory, pipeline };
}

// Every dataset first (seeding what is missing), then one server per size, all started before measuring:
// the rounds interleave sizes and cases, so a burst of load on the shared machine hits all of them alike.
const started = Date.now();
const datasets: Dataset[] = [];
for (const customers of sizes) datasets.push(await ensureDataset(dialect, customers, log));
const targets: Target[] = [];
try {
  for (const dataset of datasets) {
    const cases = casesFor(dataset);
    const { child, ready } = await startServer(dataset, cases);
    targets.push({
      customers: dataset.customers,
      dataset,
      cases,
      child,
      ready,
      base: `http://127.0.0.1:${ready.port}`,
      samples: new Map(cases.map((c) => [c.name, { list: [], memory: [], pipeline: [] }])),
    });
  }
  log(`warming up (${warmup} s per route) …`);
  for (const t of targets) for (const c of t.cases) await measure(t, c, warmup);
  for (let r = 1; r <= rounds; r++) {
    for (const c of targets[0]!.cases) {
      for (const t of targets) {
        const { list, memory, pipeline } = await measure(t, c, duration);
        t.samples.get(c.name)!.list.push(list);
        t.samples.get(c.name)!.memory.push(memory);
        if (pipeline) t.samples.get(c.name)!.pipeline.push(pipeline);
        log(
          `round ${r}/${rounds} ${t.customers.toLocaleString("en-US").padStart(9)} ${c.name.padEnd(22)} list ${list.rps.toFixed(0).padStart(5)} req/s p99 ${String(list.p99).padStart(5)} ms | memory ${memory.rps.toFixed(0).padStart(5)} req/s p99 ${String(memory.p99).padStart(5)} ms` +
            (pipeline ? ` | pipeline ${pipeline.rps.toFixed(0).padStart(5)} req/s` : "") +
            ` | server CPU ms/req list ${cpu(list)} memory ${cpu(memory)}` +
            (list.dbCpuMsPerRequest === undefined ? "" : ` | PostgreSQL CPU ms/req list ${list.dbCpuMsPerRequest.toFixed(2)} memory ${(memory.dbCpuMsPerRequest ?? Number.NaN).toFixed(2)}`),
        );
      }
    }
  }
} finally {
  for (const t of targets) {
    t.child.kill("SIGTERM");
    if (t.child.exitCode === null) await once(t.child, "exit");
  }
}

const results = targets.map((t) => ({
  customers: t.customers,
  dataset: t.dataset,
  cases: t.cases.map((c): CaseResult => {
    const s = t.samples.get(c.name)!;
    const list = { rps: median(s.list.map((x) => x.rps)), p99: median(s.list.map((x) => x.p99)), rounds: s.list };
    const memory = { rps: median(s.memory.map((x) => x.rps)), p99: median(s.memory.map((x) => x.p99)), rounds: s.memory };
    const pipeline = s.pipeline.length === 0 ? null : { rps: median(s.pipeline.map((x) => x.rps)), p99: median(s.pipeline.map((x) => x.p99)), rounds: s.pipeline };
    return {
      name: c.name,
      path: `/api/service/${c.list}?${new URLSearchParams(c.query).toString()}`,
      elements: t.ready.pageSizes[c.name] ?? 0,
      bytes: Math.round(median(s.list.map((x) => x.bytesPerRequest))),
      list,
      memory,
      pipeline,
      ratio: list.rps / memory.rps,
      cpu: {
        list: median(s.list.map((x) => x.cpuMsPerRequest ?? Number.NaN)),
        memory: median(s.memory.map((x) => x.cpuMsPerRequest ?? Number.NaN)),
        ratio: median(s.memory.map((x) => x.cpuMsPerRequest ?? Number.NaN)) / median(s.list.map((x) => x.cpuMsPerRequest ?? Number.NaN)),
        ...(dialect === "postgres" ? { databaseList: median(s.list.map((x) => x.dbCpuMsPerRequest ?? Number.NaN)) } : {}),
      },
    };
  }),
}));

// Markdown for bench/README.md.
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const lines: string[] = [];
const withPipeline = args.pipeline;
lines.push(
  `| customers | case | elements | KiB | list req/s | list p99 ms | memory req/s | memory p99 ms | list / memory |${withPipeline ? " pipeline req/s | pipeline p99 ms |" : ""} CPU ms/req list | CPU ms/req memory | memory / list CPU |${dialect === "postgres" ? " PostgreSQL CPU ms/req list |" : ""}`,
);
lines.push(`|---:|---|---:|---:|---:|---:|---:|---:|---:|${withPipeline ? "---:|---:|" : ""}---:|---:|---:|${dialect === "postgres" ? "---:|" : ""}`);
for (const r of results) {
  for (const c of r.cases) {
    lines.push(
      `| ${fmt(r.customers)} | ${c.name} | ${c.elements} | ${(c.bytes / 1024).toFixed(0)} | ${fmt(c.list.rps)} | ${c.list.p99} | ${fmt(c.memory.rps)} | ${c.memory.p99} | ${c.ratio.toFixed(2)} |` +
        (c.pipeline ? ` ${fmt(c.pipeline.rps)} | ${c.pipeline.p99} |` : "") +
        ` ${c.cpu.list.toFixed(2)} | ${c.cpu.memory.toFixed(2)} | ${c.cpu.ratio.toFixed(2)} |` +
        (c.cpu.databaseList === undefined ? "" : ` ${c.cpu.databaseList.toFixed(2)} |`),
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
  settings: { client, dialect, rounds, duration, warmup, connections, sqliteCacheKiB: args["sqlite-cache-kib"] || "default" },
  results,
};
const variant = `${args["sqlite-cache-kib"] ? `-cache${args["sqlite-cache-kib"]}` : ""}${args.pipeline ? "-pipeline" : ""}${args.cases ? "-some-cases" : ""}`;
const file = path.join(resultsDir, `${dialect}${variant}-latest.json`);
writeFileSync(file, JSON.stringify(report, null, 2) + "\n");
log(`done in ${report.minutes} min; results in ${path.relative(process.cwd(), file)}`);
