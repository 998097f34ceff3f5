// Values remembered between requests, forgotten the moment the database says they may have changed,
// whoever changed them (src/platform/db/change-watch.ts): authenticated API keys (a key lookup cost every read
// request a database round trip: on PostgreSQL ~0.15 ms of the process's CPU and ~0.1 ms of the
// server's, a fifth of an invoices page, bench/README.md, issue 12), and the plugins payments run.
// - this process's own changes (a key revoked, a plugin saved) clear the cache directly;
// - another connection's changes clear it through the change watch.
// Only what was found is remembered (an unknown key costs its lookup each time, and is what the
// failed-key limiter counts), at most MAX_KEYS entries, none for longer than API_KEY_CACHE_SECONDS (60 by
// default; 0 remembers nothing). Behind a pooler that does not keep a session (PgBouncer in transaction
// mode) notifications do not arrive: set it to 0 there.
import type { ChangeWatch } from "../platform/db/change-watch.ts";

/** Named by migration 0014 too. */
export const KEY_CHANGES_CHANNEL = "storefront_api_keys";
/** Named by migration 0017 too. */
export const PLUGIN_CHANGES_CHANNEL = "storefront_plugins";
export { LISTENER_NAME } from "../platform/db/change-watch.ts";
const MAX_KEYS = 10_000;

export interface KeyCache<T> {
  /** The remembered value of a key hash, or undefined. */
  get(hash: string): T | undefined;
  /**
   * A lookup about to start: `remember` keeps its result unless a change was seen in between (a revocation
   * that committed while the lookup ran must not be remembered as the key's state).
   */
  begin(): (hash: string, value: T) => void;
  /** Forgets everything (a key of this process changed). */
  clear(): void;
}


export function createKeyCache<T>(changes: ChangeWatch, channel: string, now: () => number = Date.now, ttlMs = 60_000): KeyCache<T> {
  if (ttlMs <= 0) return { get: () => undefined, begin: () => () => {}, clear: () => {} };
  const entries = new Map<string, { value: T; until: number }>();
  let generation = 0;
  const clear = () => {
    entries.clear();
    generation++;
  };
  const freshness = changes.watch(channel, clear);
  return {
    get(hash) {
      if (!freshness.check()) return undefined;
      const entry = entries.get(hash);
      if (entry === undefined) return undefined;
      if (entry.until <= now()) {
        entries.delete(hash);
        return undefined;
      }
      return entry.value;
    },
    begin() {
      freshness.check();
      const started = generation;
      return (hash, value) => {
        if (!freshness.check() || generation !== started) return;
        if (entries.size >= MAX_KEYS) entries.delete(entries.keys().next().value!);
        entries.set(hash, { value, until: now() + ttlMs });
      };
    },
    clear,
  };
}
