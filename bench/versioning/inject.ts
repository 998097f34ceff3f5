// Versioning benchmark, in process: the same ~265 KiB page through app.inject on the app without the
// versioning hooks (`off`), with them (`on`, current version) and pinned to an older version whose step
// renames a field. No sockets and no load generator: CPU time per request of this one process, sides
// interleaved in short batches so a noisy neighbour hits each alike; medians. Steadier than run.ts on a
// shared machine, and it measures the same thing: what the hooks add to a request.
//
//   node bench/versioning/inject.ts [--rounds 15] [--batch 100]
import { parseArgs } from "node:util";
import { OLD_VERSION, PAGE_PATH, pageApp } from "./server.ts";

const { values: args } = parseArgs({ options: { rounds: { type: "string", default: "15" }, batch: { type: "string", default: "100" } } });
const rounds = Number(args.rounds);
const batch = Number(args.batch);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const off = await pageApp("off");
const on = await pageApp("on");
const sides = [
  { name: "off", app: off, headers: {} },
  { name: "on", app: on, headers: {} },
  { name: "on-pinned-old", app: on, headers: { "storefront-version": OLD_VERSION } },
];
const samples: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.name, []]));

async function measure(side: (typeof sides)[number], n: number): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const r = await side.app.inject({ method: "GET", url: PAGE_PATH, headers: side.headers });
    if (r.statusCode !== 200) throw new Error(`${side.name}: HTTP ${r.statusCode}`);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

for (const side of sides) await measure(side, batch); // warm-up: JIT, schema compilation
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? sides : [...sides].reverse();
  for (const side of order) samples[side.name]!.push(await measure(side, batch));
}
const med = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)]));
const spread = (k: string) => `${Math.min(...samples[k]!).toFixed(0)}–${Math.max(...samples[k]!).toFixed(0)}`;
process.stdout.write(
  [
    `| side | CPU µs/request (median of ${rounds} batches of ${batch}) | batches' range |`,
    `|---|---:|---|`,
    ...sides.map((s) => `| ${s.name} | ${med[s.name]!.toFixed(0)} | ${spread(s.name)} |`),
    "",
    `on / off: **${(med.on! / med.off!).toFixed(3)}×**; pinned to ${OLD_VERSION} / off: **${(med["on-pinned-old"]! / med.off!).toFixed(3)}×**`,
  ].join("\n") + "\n",
);
await off.close();
await on.close();
