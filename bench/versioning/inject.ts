// Versioning benchmark, in process: the same ~265 KiB page through app.inject on the app without the
// versioning hooks (`off`), with them (`on`, current version) and pinned to an older version whose step
// renames a field. No sockets and no load generator: CPU time per request of this one process, sides
// interleaved in short batches so a noisy neighbour hits each alike; medians. Steadier than run.ts on a
// shared machine, and it measures the same thing: what the hooks add to a request.
//
// A second pair of sides answers a tiny body (`{"status":"ok"}`), where the hooks' fixed cost per request is
// the largest share of the request: its difference is what the hooks cost any request, in microseconds.
//
//   node bench/versioning/inject.ts [--rounds 15] [--batch 100]
import { parseArgs } from "node:util";
import { OLD_VERSION, PAGE_PATH, TINY_PATH, pageApp } from "./server.ts";

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
  { name: "off", app: off, url: PAGE_PATH, n: batch, headers: {} },
  { name: "on", app: on, url: PAGE_PATH, n: batch, headers: {} },
  { name: "on-pinned-old", app: on, url: PAGE_PATH, n: batch, headers: { "storefront-version": OLD_VERSION } },
  { name: "tiny-off", app: off, url: TINY_PATH, n: batch * 20, headers: {} },
  { name: "tiny-on", app: on, url: TINY_PATH, n: batch * 20, headers: {} },
];
const samples: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.name, []]));

async function measure(side: (typeof sides)[number]): Promise<number> {
  const n = side.n;
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const r = await side.app.inject({ method: "GET", url: side.url, headers: side.headers });
    if (r.statusCode !== 200) throw new Error(`${side.name}: HTTP ${r.statusCode}`);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

for (const side of sides) await measure(side); // warm-up: JIT, schema compilation
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? sides : [...sides].reverse();
  for (const side of order) samples[side.name]!.push(await measure(side));
}
const med = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)]));
const spread = (k: string) => `${Math.min(...samples[k]!).toFixed(1)}–${Math.max(...samples[k]!).toFixed(1)}`;
process.stdout.write(
  [
    `| side | CPU µs/request (median of ${rounds} batches) | batches' range |`,
    `|---|---:|---|`,
    ...sides.map((s) => `| ${s.name} (${s.n}/batch) | ${med[s.name]!.toFixed(1)} | ${spread(s.name)} |`),
    "",
    `page: on / off **${(med.on! / med.off!).toFixed(3)}×**; pinned to ${OLD_VERSION} / off **${(med["on-pinned-old"]! / med.off!).toFixed(3)}×**`,
    `tiny: on / off **${(med["tiny-on"]! / med["tiny-off"]!).toFixed(3)}×** (${(med["tiny-on"]! - med["tiny-off"]!).toFixed(1)} µs per request)`,
  ].join("\n") + "\n",
);
await off.close();
await on.close();
