// What follows a commit, as background loops `serve` owns: the read model's projector and the events'
// sequencer. This process's payments kick them; every FOLLOW_INTERVAL_MS they also look for what other
// processes committed (any number of processes may run them: each pass claims its work in the database).
import { performance } from "node:perf_hooks";
import type { Services } from "../services.ts";
import { type BackgroundLoop, type LoopLogger, startBackgroundLoop } from "./background-loop.ts";

/** How often the projector and the sequencer look for work committed by other processes. */
const FOLLOW_INTERVAL_MS = 250;

/**
 * The projector waits after a kick in proportion to its last pass (twice as long, 10 ms to 500 ms): a burst
 * of payments is folded into few passes, and a pass that rebuilds large documents keeps to about a third
 * of the process's time.
 */
export function startFollowers(services: Services, log: LoopLogger): BackgroundLoop[] {
  let lastPassMs = 0;
  const projector: BackgroundLoop = startBackgroundLoop(
    "read model projector",
    FOLLOW_INTERVAL_MS,
    async () => {
      const started = performance.now();
      // One batch a pass, so other work runs between batches; a full batch asks for the next pass.
      const rebuilt = await services.projector.runOnce();
      lastPassMs = performance.now() - started;
      if (rebuilt > 0) projector.kick();
    },
    log,
    { kickDelayMs: () => Math.min(500, Math.max(10, 2 * lastPassMs)) },
  );
  const sequencer = startBackgroundLoop("event sequencer", FOLLOW_INTERVAL_MS, async () => void (await services.sequencer.run()), log, { kickDelayMs: 2 });
  services.metrics.trackLoop("readmodel_projector", () => projector.lastSuccessAt());
  services.metrics.trackLoop("event_sequencer", () => sequencer.lastSuccessAt());
  services.onCommitted(() => {
    projector.kick();
    sequencer.kick();
  });
  return [projector, sequencer];
}
