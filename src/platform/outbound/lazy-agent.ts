// An undici Agent made by the first request that needs it: undici (about 100 modules, a tenth of the
// server's start-up) is loaded when the service first sends something, not when it starts.
import type * as Undici from "undici";

export interface LazyAgent {
  /** The agent, made (and undici loaded) on the first call. */
  get(): Promise<Undici.Agent>;
  /** Closes the agent if one was made. */
  close(): Promise<void>;
}

export function lazyAgent(make: (undici: typeof Undici) => Undici.Agent): LazyAgent {
  let agent: Promise<Undici.Agent> | null = null;
  return {
    get: () => (agent ??= import("undici").then(make)),
    close: async () => {
      if (agent !== null) await (await agent).close();
    },
  };
}
