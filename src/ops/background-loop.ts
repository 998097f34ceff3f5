// A small background loop owned by `serve`: runs one pass at start, then one pass every interval after the
// previous pass ended (never two at once), logs failures and keeps going. Each pass claims its work from
// the database, so any number of processes can run the same loop. stop() waits for the pass in flight.
export interface BackgroundLoop {
  stop(): Promise<void>;
}

export interface LoopLogger {
  error(obj: unknown, msg: string): void;
}

export function startBackgroundLoop(name: string, intervalMs: number, pass: () => Promise<void>, log: LoopLogger): BackgroundLoop {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;

  const tick = () => {
    timer = null;
    running = pass()
      .catch((err: unknown) => log.error({ err, loop: name }, `${name} failed; retrying in ${Math.round(intervalMs / 1000)} s`))
      .finally(() => {
        running = null;
        if (!stopped) schedule();
      });
  };
  const schedule = () => {
    timer = setTimeout(tick, intervalMs);
    timer.unref(); // never the reason the process stays alive
  };
  tick();

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
