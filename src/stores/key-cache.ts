// Authenticated API keys remembered between requests. Looking a key up cost every read request a database
// round trip: on PostgreSQL ~0.15 ms of the process's CPU and ~0.1 ms of the server's, a fifth of an
// invoices page (bench/README.md, issue 12). A remembered key is forgotten the moment any key changes,
// whoever changes it, so revoking a key still takes effect at once:
// - this process's own changes (revoke, new version) clear the cache directly;
// - SQLite: `PRAGMA data_version` moves when another connection (the command line, another process)
//   commits anything; checked on every lookup (about a microsecond), and the cache cleared when it moved;
// - PostgreSQL: a trigger on api_keys notifies `storefront_api_keys` with its schema after any change
//   (migration 0014), committed or not at all; a connection of this process listens, and while it is not
//   listening (connecting, or lost) nothing is remembered.
// Only keys that authenticated are remembered (an unknown key costs its lookup each time, and is what the
// failed-key limiter counts), at most MAX_KEYS of them, none for longer than API_KEY_CACHE_SECONDS (60 by
// default; 0 remembers nothing and opens no listening connection). Behind a pooler that does not keep a
// session (PgBouncer in transaction mode) notifications do not arrive: set it to 0 there.
import pg from "pg";
import type SQLite from "better-sqlite3";
import type { Db } from "../db/database.ts";

/** Named by migration 0014 too. */
export const KEY_CHANGES_CHANNEL = "storefront_api_keys";
/** The listening connection's application_name (pg_stat_activity). */
export const LISTENER_NAME = "storefront key changes";
const MAX_KEYS = 10_000;
const RELISTEN_MS = 1_000;

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
  close(): Promise<void>;
}

interface Freshness {
  /** Whether remembered keys may be used now (what changed since the last call is cleared first). */
  check(): boolean;
  close(): Promise<void>;
}

export function createKeyCache<T>(db: Pick<Db, "sqlite">, databaseUrl: string | null, now: () => number = Date.now, ttlMs = 60_000): KeyCache<T> {
  if (ttlMs <= 0) return { get: () => undefined, begin: () => () => {}, clear: () => {}, close: async () => {} };
  const entries = new Map<string, { value: T; until: number }>();
  let generation = 0;
  const clear = () => {
    entries.clear();
    generation++;
  };
  const freshness: Freshness = db.sqlite !== null ? sqliteFreshness(db.sqlite, clear) : postgresFreshness(databaseUrl!, clear);
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
    close: () => freshness.close(),
  };
}

/** SQLite: another connection's commit moves data_version; this connection's own writes do not. */
function sqliteFreshness(handle: SQLite.Database, clear: () => void): Freshness {
  const version = handle.prepare("pragma data_version").pluck();
  let seen = version.get();
  return {
    check() {
      const current = version.get();
      if (current !== seen) {
        seen = current;
        clear();
      }
      return true;
    },
    close: async () => {},
  };
}

/** PostgreSQL: a connection listening for the api_keys trigger's notifications of this schema. */
function postgresFreshness(url: string, clear: () => void): Freshness {
  let listening = false;
  let closed = false;
  let client: pg.Client | null = null;
  let retry: NodeJS.Timeout | null = null;

  const lost = (dead: pg.Client) => {
    if (client !== dead) return;
    listening = false;
    clear();
    client = null;
    void dead.end().catch(() => {});
    if (!closed) {
      retry = setTimeout(listen, RELISTEN_MS);
      retry.unref();
    }
  };

  async function listen(): Promise<void> {
    retry = null;
    if (closed) return;
    const c = new pg.Client({ connectionString: url, application_name: LISTENER_NAME });
    client = c;
    c.on("error", () => lost(c));
    c.on("end", () => lost(c));
    try {
      await c.connect();
      const schema = (await c.query<{ schema: string }>("select current_schema() as schema")).rows[0]!.schema;
      c.on("notification", (n) => {
        if (n.channel === KEY_CHANGES_CHANNEL && n.payload === schema) clear();
      });
      await c.query(`listen ${KEY_CHANGES_CHANNEL}`);
      if (client !== c || closed) return;
      // Whatever changed while nobody listened is forgotten with the rest.
      clear();
      listening = true;
    } catch {
      lost(c);
    }
  }
  void listen();

  return {
    check: () => listening,
    close: async () => {
      closed = true;
      listening = false;
      if (retry !== null) clearTimeout(retry);
      const c = client;
      client = null;
      if (c !== null) {
        c.removeAllListeners("end");
        c.removeAllListeners("error");
        c.on("error", () => {});
        await c.end().catch(() => {});
      }
    },
  };
}
