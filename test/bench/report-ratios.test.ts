// The webhook bench's report: a run of some cases only (`--cases reads-alone,reads-burst`, say) still gives
// the ratios those cases make, per side.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ratios, type Summaries, summarize } from "../../bench/webhook/report.ts";
import type { RoundSample } from "../../bench/webhook/round.ts";

function reads(latenciesMs: number[]): RoundSample {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return {
    rps: 50, p50: sorted[Math.floor(sorted.length / 2)]!, p99: sorted[sorted.length - 1]!, answered: sorted.length, non2xx: 0, errors: 0, seconds: 5, cutShort: false,
    serverCpuUs: 1000, mainThreadCpuUs: 500, mainThreadBusy: 0.1, mainThreadWaiting: 0.05, machineBusyCores: 0.5, threadCpuUs: {},
    postgresCpuUs: null, postgresOwnCpuUs: null, postgresWalBytes: null, latenciesMs: sorted,
  };
}

test("a run of the read cases alone reports the reads' ratios for each side that ran them", () => {
  const summaries: Summaries = {
    postgres: {
      "reads-alone": { this: summarize([reads([2, 3, 4, 10])]), baseline: summarize([reads([2, 3, 4, 12])]) },
      "reads-burst": { this: summarize([reads([3, 4, 5, 15])]), baseline: summarize([reads([3, 4, 5, 36])]) },
    },
  };
  const pooled = ratios(summaries, null).find((r) => r.name.startsWith("reads p99 during the burst / alone, every round's reads pooled"));
  assert.ok(pooled, "the pooled p99 ratio is reported");
  assert.deepEqual(pooled.values, { this: 1.5, baseline: 3 });
  assert.deepEqual(pooled.detail, { this: "15 / 10 ms", baseline: "36 / 12 ms" });
});

test("reads beside an ignore burst are compared with reads alone and with reads beside the payments' burst", () => {
  const summaries: Summaries = {
    sqlite: {
      "reads-alone": { this: summarize([reads([2, 3, 4, 10])]) },
      "reads-burst": { this: summarize([reads([3, 4, 5, 30])]) },
      "reads-webhooks": { this: summarize([reads([3, 4, 5, 20])]) },
    },
  };
  const found = (name: string) => ratios(summaries, null).find((r) => r.name === name);
  const webhooks = found("reads p99 during an ignore burst / alone, pooled");
  assert.deepEqual(webhooks?.values, { this: 2 });
  assert.deepEqual(webhooks?.detail, { this: "20 / 10 ms" });
  const payments = found("reads p99 during the pushInvoice burst / during an ignore burst, pooled");
  assert.deepEqual(payments?.values, { this: 1.5 });
  assert.deepEqual(payments?.detail, { this: "30 / 20 ms" });
});

test("the reads' p99 as the server timed them is compared burst against alone, and null for a version without it", () => {
  const timed = (client: number[], server: number[]): RoundSample => ({ ...reads(client), serverLatenciesMs: [...server].sort((a, b) => a - b) });
  const summaries: Summaries = {
    sqlite: {
      "reads-alone": { this: summarize([timed([2, 3, 4, 10], [1, 1, 2, 4])]), baseline: summarize([reads([2, 3, 4, 10])]) },
      "reads-burst": { this: summarize([timed([3, 4, 5, 30], [1, 2, 2, 6])]), baseline: summarize([reads([3, 4, 5, 30])]) },
    },
  };
  const serverTimed = ratios(summaries, null).find((r) => r.name === "reads p99 as the server timed them, during the burst / alone, pooled");
  assert.deepEqual(serverTimed?.values, { this: 1.5, baseline: null });
  assert.equal(serverTimed?.detail.this, "6 / 4 ms");
});
