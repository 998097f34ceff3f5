// Versioning benchmark (issue 17): what the version hooks cost a read-API-sized page (~260 KiB).
// Two server processes run at once, the same page from memory through the same response schema, one without
// the versioning hooks (`off`), one with them (`on`); each round loads `off`, `on` (current version) and
// `on` pinned to an older version whose step renames a field (the reshaping path: parse, change, stringify).
// autocannon, rounds interleaved so a noisy neighbour hits every side alike; medians.
//
//   node bench/versioning/run.ts [--rounds 5] [--duration 5] [--connections 32]
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { OLD_VERSION, PAGE_PATH, type ServerReady } from "./server.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "32" },
  },
});
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const connections = Number(args.connections);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function startServer(mode: "on" | "off"): Promise<{ child: ChildProcess; ready: ServerReady }> {
  const child = fork(path.join(HERE, "server.ts"), { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  child.send(mode);
  const [ready] = (await once(child, "message")) as [ServerReady];
  return { child, ready };
}

interface Sample {
  rps: number;
  p99: number;
  /** Server process CPU time per request, microseconds. */
  cpuPerRequest: number;
}

async function cpuOf(child: ChildProcess): Promise<number> {
  child.send("cpu");
  const [m] = (await once(child, "message")) as [{ cpuMicros: number }];
  return m.cpuMicros;
}

async function load(child: ChildProcess, port: number, headers: Record<string, string>, seconds: number): Promise<Sample> {
  const cpuBefore = await cpuOf(child);
  const r = await autocannon({ url: `http://127.0.0.1:${port}${PAGE_PATH}`, connections, duration: seconds, headers });
  const cpu = (await cpuOf(child)) - cpuBefore;
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99, cpuPerRequest: cpu / Math.max(r.requests.total, 1) };
}

const off = await startServer("off");
const on = await startServer("on");
const sides = [
  { name: "off", server: off, headers: {} },
  { name: "on", server: on, headers: {} },
  { name: "on-pinned-old", server: on, headers: { "storefront-version": OLD_VERSION } },
] as const;
const samples: Record<string, Sample[]> = { off: [], on: [], "on-pinned-old": [] };
try {
  log(`page ${off.ready.bytes} bytes (off) / ${on.ready.bytes} bytes (on); warming up`);
  for (const side of sides) await load(side.server.child, side.server.ready.port, side.headers, Number(args.warmup));
  for (let r = 1; r <= rounds; r++) {
    // Alternate the order of the sides each round: neither always follows the other.
    const order = r % 2 === 1 ? sides : [...sides].reverse();
    for (const side of order) {
      const s = await load(side.server.child, side.server.ready.port, side.headers, duration);
      samples[side.name]!.push(s);
      log(`round ${r}/${rounds} ${side.name.padEnd(14)} ${s.rps.toFixed(0).padStart(5)} req/s p99 ${s.p99} ms, ${s.cpuPerRequest.toFixed(0)} us CPU/request`);
    }
  }
} finally {
  for (const s of [off, on]) s.child.kill("SIGTERM");
}

const summary = Object.fromEntries(
  Object.entries(samples).map(([name, xs]) => [
    name,
    { rps: median(xs.map((x) => x.rps)), p99: median(xs.map((x) => x.p99)), cpuPerRequest: median(xs.map((x) => x.cpuPerRequest)), rounds: xs },
  ]),
);
const ratio = (a: string, b: string) => summary[a]!.rps / summary[b]!.rps;
const cpuRatio = (a: string, b: string) => summary[a]!.cpuPerRequest / summary[b]!.cpuPerRequest;
const lines = [
  `| side | req/s (median) | p99 ms (median) | server CPU µs/request (median) |`,
  `|---|---:|---:|---:|`,
  ...Object.entries(summary).map(([name, s]) => `| ${name} | ${s.rps.toFixed(0)} | ${s.p99} | ${s.cpuPerRequest.toFixed(0)} |`),
  "",
  `req/s on / off (current version): **${ratio("on", "off").toFixed(3)}×**; pinned to ${OLD_VERSION} / off: **${ratio("on-pinned-old", "off").toFixed(3)}×**`,
  `CPU/request on / off: **${cpuRatio("on", "off").toFixed(3)}×**; pinned / off: **${cpuRatio("on-pinned-old", "off").toFixed(3)}×**`,
];
process.stdout.write(lines.join("\n") + "\n");
mkdirSync(path.join(HERE, "results"), { recursive: true });
writeFileSync(
  path.join(HERE, "results", "latest.json"),
  JSON.stringify(
    {
      at: new Date().toISOString(),
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? "", node: process.version, loadavg: os.loadavg() },
      settings: { rounds, duration, connections, pageBytes: off.ready.bytes },
      summary,
      ratios: {
        rpsOnOverOff: ratio("on", "off"),
        rpsPinnedOldOverOff: ratio("on-pinned-old", "off"),
        cpuOnOverOff: cpuRatio("on", "off"),
        cpuPinnedOldOverOff: cpuRatio("on-pinned-old", "off"),
      },
    },
    null,
    2,
  ) + "\n",
);
