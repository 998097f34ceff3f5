// What follows a commit, as background loops `serve` owns: the read model's projector and the events'
// sequencer. This process's payments kick them; every FOLLOW_INTERVAL_MS they also look for what other
// processes committed (any number of processes may run them: each pass claims its work in the database).
import { performance } from "node:perf_hooks";
import type { Services } from "./services.ts";
import { type BackgroundLoop, type LoopLogger, startBackgroundLoop } from "./platform/ops/background-loop.ts";

/** How often the projector and the sequencer look for work committed by other processes. */
const FOLLOW_INTERVAL_MS = 250;
/** The projector's shortest wait after a kick (see startFollowers). */
const PROJECTOR_KICK_FLOOR_MS = 25;

/**
 * The projector waits after a kick in proportion to its last pass (twice as long, 25 ms to 500 ms): a burst
 * of payments is folded into few passes, and a pass that rebuilds large documents keeps to about a third
 * of the process's time. After a full batch (a backlog) it goes on at once, 5 ms apart. A stale document is
 * never served (a list page that meets one assembles it from the sources), so the floor trades the reads'
 * cost during a burst against the projector's: 5 ms doubled the projector thread's CPU during a burst at
 * 100 payments/s, and the reads' tail came out shorter in two runs of four and longer in the other two
 * (bench/README.md, thirtieth pass).
 */
export function startFollowers(services: Services, log: LoopLogger): BackgroundLoop[] {
  let lastPassMs = 0;
  let backlog = false;
  const projector: BackgroundLoop = startBackgroundLoop(
    "read model projector",
    FOLLOW_INTERVAL_MS,
    async () => {
      const started = performance.now();
      // One batch a pass, so other work runs between batches; a pass that did work asks for the next one.
      const pass = await services.projector.runOnce();
      lastPassMs = performance.now() - started;
      backlog = pass.more;
      if (pass.documents > 0) projector.kick();
    },
    log,
    // A backlog (a bulk import, an upgrade's rebuild) is worked off pass after pass; a burst is folded.
    { kickDelayMs: () => (backlog ? 5 : Math.min(500, Math.max(PROJECTOR_KICK_FLOOR_MS, 2 * lastPassMs))) },
  );
  // Feed reads number their store's events themselves: the loop only needs to fold a burst into few passes.
  const sequencer = startBackgroundLoop("event sequencer", FOLLOW_INTERVAL_MS, async () => void (await services.sequencer.run()), log, { kickDelayMs: 50 });
  services.metrics.trackLoop("readmodel_projector", () => projector.lastSuccessAt());
  services.metrics.trackLoop("event_sequencer", () => sequencer.lastSuccessAt());
  services.onCommitted(() => {
    projector.kick();
    sequencer.kick();
  });
  return [projector, sequencer];
}
