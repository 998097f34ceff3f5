// The service's idle footprint and its time to ready, as an operator starts it: `npm start` (the README's
// command) on a fresh SQLite database with the default settings (sandbox pool and reader threads sized by
// the machine). Per round: the time from spawning npm to the first 200 of /readyz, the resident memory of
// the service's processes (the server and anything it starts; npm and a shell wrapper aside) after a few
// seconds idle, the same after a first day's traffic (payments, pages, events, the console) and a few more
// seconds idle, and the processes the server has started. With --baseline, another checkout (after `npm ci`
// in it) runs in the same rounds, interleaved. With --threads, one more start reports each thread's
// JavaScript heap from Node's diagnostic report.
//
//   node bench/footprint/run.ts [--rounds 5] [--idle 5] [--baseline DIR] [--threads] [--cold] [--direct]
//
// --direct runs what npm start runs, without npm, to tell npm's own start-up from the service's. --cold
// empties the compile cache (node_modules/.cache/storefront/compile) before every round: the first start after
// `npm ci` or an upgrade. Targets (issue 30): at most 150 MB together, idle; no child process after start-up;
// /readyz 200 within 1 s of `npm start`.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { type TreeFootprint, cpuMs, round1, serviceFootprint } from "./proc.ts";
import { firstDay } from "./traffic.ts";

const HERE = path.resolve(import.meta.dirname, "../..");
const ADMIN_TOKEN = "footprint-bench-admin-token-0123";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    idle: { type: "string", default: "5" },
    baseline: { type: "string" },
    threads: { type: "boolean", default: false },
    cold: { type: "boolean", default: false },
    direct: { type: "boolean", default: false },
    out: { type: "string" },
  },
});

interface Round {
  side: string;
  readyMs: number;
  /** CPU the server used until ready (all threads): what the start costs whatever else the machine runs. */
  cpuToReadyMs: number;
  idle: TreeFootprint;
  afterTraffic: TreeFootprint;
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  return port;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(root: string, extraEnv: Record<string, string> = {}): Promise<{ npm: ChildProcess; url: string; readyMs: number; cpuToReadyMs: number; dir: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-footprint-"));
  const port = await freePort();
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: `sqlite:${path.join(dir, "storefront.db")}`, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ADMIN_TOKEN, ...extraEnv };
  for (const k of ["SECRETS_KEY", "READ_THREADS", "PLUGIN_POOL_SIZE", "NODE_COMPILE_CACHE"]) if (!(k in extraEnv)) delete env[k];
  const url = `http://127.0.0.1:${port}`;
  const started = performance.now();
  // --direct: the command npm start runs, without npm (npm's own start-up apart), this checkout's only.
  const command = args.direct ? [process.execPath, ["--max-semi-space-size=4", "bin/storefront.js", "serve"]] as const : (["npm", ["start"]] as const);
  const npm = spawn(command[0], [...command[1]], { cwd: root, env, stdio: ["ignore", "ignore", "inherit"] });
  for (;;) {
    if (npm.exitCode !== null) throw new Error(`npm start exited with ${npm.exitCode} in ${root}`);
    const ok = await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    await sleep(10);
  }
  const readyMs = Math.round(performance.now() - started);
  const { processes } = serviceFootprint(npm.pid!, args.direct);
  const server = processes.find((p) => !processes.some((q) => q.pid === p.ppid))!;
  return { npm, url, readyMs, cpuToReadyMs: cpuMs(server.pid), dir };
}

async function stop(npm: ChildProcess, dir: string): Promise<void> {
  const started = serviceFootprint(npm.pid!, args.direct).processes.map((p) => p.pid);
  const exited = once(npm, "exit");
  npm.kill("SIGTERM");
  await exited;
  // A server that outlives npm (a baseline before issue 30's fix orphans it) is stopped here, by its pid.
  for (let i = 0; i < 50 && started.some(alive); i++) await sleep(100);
  for (const pid of started.filter(alive)) process.kill(pid, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function round(side: string, root: string): Promise<Round> {
  if (args.cold) rmSync(path.join(root, "node_modules/.cache/storefront/compile"), { recursive: true, force: true });
  const { npm, url, readyMs, cpuToReadyMs, dir } = await start(root);
  try {
    await sleep(Number(args.idle) * 1000);
    const idle = serviceFootprint(npm.pid!, args.direct);
    await firstDay(url, ADMIN_TOKEN);
    await sleep(Number(args.idle) * 1000);
    const afterTraffic = serviceFootprint(npm.pid!, args.direct);
    return { side, readyMs, cpuToReadyMs, idle, afterTraffic };
  } finally {
    await stop(npm, dir);
  }
}

/** One start with Node's diagnostic report on SIGUSR2: each thread's JavaScript heap, after traffic. */
async function threads(root: string): Promise<unknown[]> {
  const reports = mkdtempSync(path.join(os.tmpdir(), "storefront-report-"));
  const { npm, url, dir } = await start(root, { NODE_OPTIONS: `--report-on-signal --report-signal=SIGUSR2 --report-directory=${reports}` });
  try {
    await firstDay(url, ADMIN_TOKEN);
    await sleep(Number(args.idle) * 1000);
    const { processes } = serviceFootprint(npm.pid!, args.direct);
    const server = processes.find((p) => !processes.some((q) => q.pid === p.ppid))!;
    process.kill(server.pid, "SIGUSR2");
    let file: string | undefined;
    while (!(file = readdirSync(reports).find((f) => f.endsWith(".json")))) await sleep(50);
    await sleep(200);
    const report = JSON.parse(readFileSync(path.join(reports, file), "utf8")) as { javascriptHeap: Heap; workers: { header: { event: string }; javascriptHeap: Heap }[] };
    const mb = (n: number) => round1(n / 1048576);
    const row = (name: string, h: Heap) => ({ thread: name, heapCommittedMb: mb(h.totalCommittedMemory), heapUsedMb: mb(h.usedMemory), externalMb: mb(h.externalMemory) });
    return [row("main", report.javascriptHeap), ...report.workers.map((w) => row(/\[(.*)\]/.exec(w.header.event)?.[1] ?? "worker", w.javascriptHeap))];
  } finally {
    await stop(npm, dir);
    rmSync(reports, { recursive: true, force: true });
  }
}

interface Heap {
  totalCommittedMemory: number;
  usedMemory: number;
  externalMemory: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const sides: [string, string][] = [["this", HERE], ...(args.baseline ? [["baseline", path.resolve(args.baseline)] as [string, string]] : [])];
// Unless --cold: one start per side first, unmeasured, so that every measured start finds the compile cache
// as an operator's second start does (the first start after an install or an upgrade fills it).
if (!args.cold) for (const [, root] of sides) await stop(...(await start(root).then((s) => [s.npm, s.dir] as const)));
const rounds: Round[] = [];
for (let i = 0; i < Number(args.rounds); i++) {
  for (const [side, root] of i % 2 === 0 ? sides : [...sides].reverse()) {
    const r = await round(side, root);
    rounds.push(r);
    process.stderr.write(`${side} round ${i + 1}: ready ${r.readyMs} ms (server CPU ${r.cpuToReadyMs} ms), idle ${r.idle.rssMb} MB (${r.idle.children} children), after traffic ${r.afterTraffic.rssMb} MB (${r.afterTraffic.children} children)\n`);
  }
}
const summary = sides.map(([side, root]) => {
  const mine = rounds.filter((r) => r.side === side);
  return {
    side,
    root,
    readyMsMedian: median(mine.map((r) => r.readyMs)),
    cpuToReadyMsMedian: median(mine.map((r) => r.cpuToReadyMs)),
    idleRssMbMedian: median(mine.map((r) => r.idle.rssMb)),
    afterTrafficRssMbMedian: median(mine.map((r) => r.afterTraffic.rssMb)),
    childrenAfterStart: Math.max(...mine.map((r) => r.idle.children)),
    childrenAfterTraffic: Math.max(...mine.map((r) => r.afterTraffic.children)),
    idleThreads: mine.at(-1)!.idle.processes.map((p) => ({ comm: p.comm, rssMb: round1(p.rssKb / 1024), threads: p.threadNames.filter((n) => n !== "node").join(" ") })),
  };
});
const machine = { cpu: os.cpus()[0]?.model, cpus: os.availableParallelism(), memGb: round1(os.totalmem() / 2 ** 30), node: process.version, kernel: os.release() };
const result = { when: new Date().toISOString(), machine, cold: args.cold, idleSeconds: Number(args.idle), summary, threads: args.threads ? await threads(HERE) : undefined, rounds };
console.log(JSON.stringify({ machine, summary, threads: result.threads }, null, 2));
const out = args.out ?? path.join(import.meta.dirname, "results", `${result.when.slice(0, 16).replace(/[:]/g, "")}${args.cold ? "-cold" : ""}.json`);
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
