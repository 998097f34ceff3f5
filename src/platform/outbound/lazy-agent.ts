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
    get: () => (agent ??= import("undici").then((undici) => make(commonJsExports(undici)))),
    close: async () => {
      if (agent !== null) await (await agent).close();
    },
  };
}

/**
 * undici is CommonJS. Node's own import gives its exports by name (and all of them as `default`); the
 * server's bundle (tools/build-server.js) gives them as `default` only, so `Agent` and `buildConnector` by
 * name were undefined there and every outbound request failed. `default` is the exports either way.
 */
function commonJsExports(imported: typeof Undici): typeof Undici {
  return (imported as typeof Undici & { default?: typeof Undici }).default ?? imported;
}
