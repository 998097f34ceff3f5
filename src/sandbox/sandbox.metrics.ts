// The sandbox's metrics: runs counted and timed by outcome, its queue observed from outside.
import { performance } from "node:perf_hooks";
import { Gauge } from "prom-client";
import type { Metrics } from "../platform/ops/metrics.ts";
import type { RunOutcome, Sandbox } from "./index.ts";

/** Outcome label of a run: bounded by the result statuses and the error kinds. */
const outcomeOf = (o: RunOutcome): string => (o.ok ? o.result.status : o.error.kind);

/**
 * The sandbox with its runs counted and timed, and its queue observed from outside: runs in flight, runs
 * waiting (those beyond the pool's workers), and each run's wait (its time in `run` minus its run time).
 */
export function instrumentSandbox(sandbox: Sandbox, metrics: Metrics, poolSize: number): Sandbox {
  let inFlight = 0;
  new Gauge({
    name: "storefront_sandbox_runs_in_flight",
    help: "Plugin runs started or waiting for a worker.",
    registers: [metrics.registry],
    collect() {
      this.set(inFlight);
    },
  });
  new Gauge({
    name: "storefront_sandbox_queue_depth",
    help: "Plugin runs waiting for a sandbox worker (runs in flight beyond the number of workers).",
    registers: [metrics.registry],
    collect() {
      this.set(Math.max(0, inFlight - poolSize));
    },
  });
  new Gauge({ name: "storefront_sandbox_workers", help: "Sandbox worker threads (PLUGIN_POOL_SIZE).", registers: [metrics.registry] }).set(poolSize);

  return {
    async run(input, host) {
      const started = performance.now();
      inFlight++;
      try {
        const outcome = await sandbox.run(input, host);
        const outcomeLabel = outcomeOf(outcome);
        metrics.pluginRuns.inc({ outcome: outcomeLabel });
        metrics.pluginRunDuration.observe({ outcome: outcomeLabel }, outcome.durationMs / 1000);
        metrics.sandboxQueueWait.observe(Math.max(0, performance.now() - started - outcome.durationMs) / 1000);
        return outcome;
      } finally {
        inFlight--;
      }
    },
    check: (source) => sandbox.check(source),
    close: () => sandbox.close(),
  };
}
