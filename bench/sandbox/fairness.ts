// Sandbox fairness benchmark: `node bench/sandbox/fairness.ts [--baseline <git rev>] [--rounds N]`.
// One store floods 60 `while true do end` runs (default limits: 250 ms of CPU each, one worker per
// core); 0.1, 1 and 3 s later another store runs a trivial plugin. Reported: that trivial run's
// latency (queueing included), median over rounds, and what became of the flood. With --baseline, the
// sandbox of that commit (extracted into $TMPDIR/storefront-baseline-<rev>) runs the same rounds, interleaved
// with this tree's, so both sides see the same noise; and then the fixed cost of one trivial run
// (sequential, one store) on both sides, to show what the lanes cost when nobody floods (--skip-fixed
// to leave it out). Raw figures: bench/results/tmp/fairness.json.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { RunInput, RunOutcome, Sandbox, SandboxHost } from "../../src/sandbox/index.ts";

const { values } = parseArgs({ options: { baseline: { type: "string" }, rounds: { type: "string", default: "5" }, flood: { type: "string", default: "60" }, "skip-fixed": { type: "boolean", default: false } } });
const ROUNDS = Number(values.rounds);
const FLOOD = Number(values.flood);
const ARRIVALS_MS = [100, 1_000, 3_000];
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

type CreateSandbox = (limits?: Record<string, unknown>) => Sandbox;

/** The sandbox module of `rev`, extracted into a temporary directory that links to this tree's node_modules. */
async function baselineModule(rev: string): Promise<CreateSandbox> {
  const sha = execFileSync("git", ["rev-parse", "--short", rev], { cwd: root, encoding: "utf8" }).trim();
  // Outside the tree (no lint, no typecheck of old code), resolving this tree's node_modules.
  const dir = path.join(os.tmpdir(), `storefront-baseline-${sha}`);
  if (!existsSync(path.join(dir, "src"))) {
    mkdirSync(dir, { recursive: true });
    execFileSync("sh", ["-c", `git archive ${sha} src | tar -x -C ${JSON.stringify(dir)}`], { cwd: root });
    symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"));
  }
  const mod = (await import(path.join(dir, "src/sandbox/index.ts"))) as { createSandbox: CreateSandbox };
  return mod.createSandbox;
}

const host: SandboxHost = { getInvoice: () => Promise.resolve(null) };
const job = (source: string, store: string): RunInput => ({
  source,
  request: { method: "POST", body: Buffer.from("{}"), headers: { "content-type": "application/json" }, query: {} },
  store: { id: store },
  plugin: { name: "bench", version: 1 },
  secrets: {},
});
const TRIVIAL = `return { status = "ignore" }`;
const ENDLESS = `while true do end`;

interface Round {
  latenciesMs: number[];
  otherOk: number;
  flood: Record<string, number>;
}

async function round(create: CreateSandbox): Promise<Round> {
  const sandbox = create();
  // Every worker started and warm (distinct stores, so that no per-store cap keeps one idle).
  for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: 16 }, (_, k) => sandbox.run(job(TRIVIAL, `st_warm${k}`), host)));
  const start = performance.now();
  const flood = Array.from({ length: FLOOD }, () => sandbox.run(job(ENDLESS, "st_flood"), host));
  const others = ARRIVALS_MS.map(
    (at) =>
      new Promise<{ ms: number; outcome: RunOutcome }>((resolve) => {
        setTimeout(() => {
          const t = performance.now();
          void sandbox.run(job(TRIVIAL, "st_other"), host).then((outcome) => resolve({ ms: performance.now() - t, outcome }));
        }, at - (performance.now() - start));
      }),
  );
  const results = await Promise.all(others);
  await sandbox.close(); // the flood still waiting ends as killed
  const floodOutcomes = await Promise.all(flood);
  const kinds: Record<string, number> = {};
  for (const o of floodOutcomes) {
    const kind = o.ok ? "ok" : o.error.message.includes("closed") ? "closed" : o.error.kind;
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return { latenciesMs: results.map((r) => r.ms), otherOk: results.filter((r) => r.outcome.ok).length, flood: kinds };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

const sides: { name: string; create: CreateSandbox }[] = [{ name: "this tree", create: (await import("../../src/sandbox/index.ts")).createSandbox as CreateSandbox }];
if (values.baseline) sides.push({ name: `baseline ${values.baseline}`, create: await baselineModule(values.baseline) });

console.log(`## Sandbox fairness — ${new Date().toISOString()}, ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model ?? "?"}), Node ${process.version}, load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
console.log(`\n${FLOOD} endless runs from one store; another store's trivial run arriving ${ARRIVALS_MS.join(", ")} ms later; ${ROUNDS} interleaved rounds\n`);
const byside = new Map<string, Round[]>();
for (let r = 0; r < ROUNDS; r++) {
  for (let k = 0; k < sides.length; k++) {
    const side = sides[(r + k) % sides.length]!;
    const result = await round(side.create);
    (byside.get(side.name) ?? byside.set(side.name, []).get(side.name)!).push(result);
    process.stderr.write(`${side.name} round ${r + 1}: ${result.latenciesMs.map(fmt).join(", ")}; flood ${JSON.stringify(result.flood)}\n`);
  }
}
console.log(`| sandbox | other store's trivial run, median (all samples) | max | answered ok | flood outcomes (all rounds) |\n|---|---|---|---|---|`);
const summary: Record<string, unknown> = {};
for (const side of sides) {
  const rounds = byside.get(side.name)!;
  const all = rounds.flatMap((r) => r.latenciesMs);
  const flood: Record<string, number> = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r.flood)) flood[k] = (flood[k] ?? 0) + v;
  const ok = rounds.reduce((a, r) => a + r.otherOk, 0);
  summary[side.name] = { medianMs: median(all), maxMs: Math.max(...all), samplesMs: all, otherOk: ok, flood };
  console.log(`| ${side.name} | **${fmt(median(all))}** (${all.map(fmt).join(", ")}) | ${fmt(Math.max(...all))} | ${ok} / ${all.length} | ${Object.entries(flood).map(([k, v]) => `${k} ${v}`).join(", ")} |`);
}

/** Median latency of one trivial run, one store, one run at a time (after a warm-up), in µs. */
async function fixedCost(create: CreateSandbox): Promise<number> {
  const sandbox = create();
  const input = job(TRIVIAL, "st_bench");
  for (let i = 0; i < 2_000; i++) await sandbox.run(input, host);
  const samples: number[] = [];
  for (let i = 0; i < 5_000; i++) {
    const t = performance.now();
    await sandbox.run(input, host);
    samples.push((performance.now() - t) * 1000);
  }
  await sandbox.close();
  return median(samples);
}

if (!values["skip-fixed"]) {
  const fixed = new Map<string, number[]>();
  for (let r = 0; r < 6; r++) {
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(r + k) % sides.length]!;
      (fixed.get(side.name) ?? fixed.set(side.name, []).get(side.name)!).push(await fixedCost(side.create));
    }
  }
  console.log(`\nFixed cost of one trivial run (one store, sequential; 6 interleaved rounds of 5,000 runs, median of each round):\n`);
  console.log(`| sandbox | median of the rounds' medians | rounds (µs) |\n|---|---:|---|`);
  for (const side of sides) {
    const rounds = fixed.get(side.name)!;
    summary[side.name] = { ...(summary[side.name] as object), fixedCostUs: median(rounds), fixedCostRoundsUs: rounds };
    console.log(`| ${side.name} | **${median(rounds).toFixed(1)} µs** | ${rounds.map((x) => x.toFixed(1)).join(", ")} |`);
  }
}

mkdirSync(path.join(root, "bench/results/tmp"), { recursive: true });
writeFileSync(path.join(root, "bench/results/tmp/fairness.json"), `${JSON.stringify({ machine: { cpus: os.availableParallelism(), model: os.cpus()[0]?.model, node: process.version, load: os.loadavg() }, flood: FLOOD, arrivalsMs: ARRIVALS_MS, rounds: ROUNDS, summary }, null, 2)}\n`);
