// The console's cold load (issue 16: the plugins page with its data in under a second): a fresh browser
// profile, signed in, opens a store's plugins page; DOMContentLoaded and the first row of data are timed,
// `--runs` times, and the medians reported. Debian's Chromium (CHROMIUM_PATH), SQLite, loopback only.
// A benchmark rather than a test: its figure depends on the machine and what else runs on it.
//
//   node bench/console/cold-load.ts [--runs 15]
import { writeFileSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { signIn, startConsole } from "../../test/helpers/browser.ts";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "15" } } });
const runs = Number(args.runs);

declare const performance: { getEntriesByType(type: string): { domContentLoadedEventEnd: number }[] };

const rig = await startConsole();
try {
  const store = await rig.h.store("Cold shop");
  const installed = await rig.h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { catalog: "generic-hmac", secrets: { signingSecret: "cold-load-secret" } });
  if (installed.statusCode !== 201) throw new Error(`install: ${installed.statusCode} ${installed.body}`);
  await signIn(rig);
  const cookies = await rig.context.cookies();
  const samples: { domContentLoaded: number; firstData: number }[] = [];
  for (let i = 0; i < runs; i++) {
    const cold = await rig.browser.newContext();
    await cold.addCookies(cookies);
    const page = await cold.newPage();
    const started = Date.now();
    await page.goto(`${rig.base}/console/stores/${store.id}/plugins`);
    await page.waitForSelector('tr[data-plugin="pay"]');
    const firstData = Date.now() - started;
    const domContentLoaded = await page.evaluate(() => performance.getEntriesByType("navigation")[0]!.domContentLoadedEventEnd);
    await cold.close();
    samples.push({ domContentLoaded, firstData });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = {
    when: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, load: os.loadavg() },
    runs,
    medianMs: { domContentLoaded: median(samples.map((s) => s.domContentLoaded)), firstData: median(samples.map((s) => s.firstData)) },
    worstMs: { firstData: Math.max(...samples.map((s) => s.firstData)) },
    samples,
  };
  process.stdout.write(
    `console cold load, ${runs} fresh profiles: DOMContentLoaded median ${summary.medianMs.domContentLoaded.toFixed(0)} ms; ` +
      `first data median ${summary.medianMs.firstData} ms, worst ${summary.worstMs.firstData} ms (target: under 1 s)\n`,
  );
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "latest.json"), `${JSON.stringify(summary, null, 2)}\n`);
} finally {
  await rig.close();
}
