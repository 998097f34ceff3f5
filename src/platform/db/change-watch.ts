// Knowing when something other code remembers may have changed in the database, whoever changed it, so a
// cache in this process can forget it at once (remembered API keys, remembered plugins):
// - SQLite: `PRAGMA data_version` moves when another connection (the command line, another process)
//   commits anything; checked on every use (about a microsecond). This process's own writes do not move
//   it: the code that makes them clears its cache directly.
// - PostgreSQL: triggers notify a channel with their schema after any change (migrations 0014, 0017); one
//   connection of this process listens to every channel in use, and while it is not listening
//   (connecting, or lost) nothing may be remembered.
import type pg from "pg";
import type SQLite from "better-sqlite3";
import { pgDriver } from "./database.ts";

/** The listening connection's application_name (pg_stat_activity). */
export const LISTENER_NAME = "storefront key changes";
const RELISTEN_MS = 1_000;

export interface Freshness {
  /** Whether remembered values may be used now (what changed since the last call is cleared first). */
  check(): boolean;
}

export interface ChangeWatch {
  /** Freshness of what a channel's changes invalidate; `clear` is called when they may have changed. */
  watch(channel: string, clear: () => void): Freshness;
  close(): Promise<void>;
}

export function createChangeWatch(db: { sqlite: SQLite.Database | null }, databaseUrl: string | null): ChangeWatch {
  return db.sqlite !== null ? sqliteWatch(db.sqlite) : postgresWatch(databaseUrl!);
}

/** SQLite: another connection's commit moves data_version; this connection's own writes do not. */
function sqliteWatch(handle: SQLite.Database): ChangeWatch {
  const version = handle.prepare("pragma data_version").pluck();
  return {
    watch(_channel, clear) {
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
      };
    },
    close: async () => {},
  };
}

/** PostgreSQL: one connection listening to every channel watched, for this schema's notifications. */
function postgresWatch(url: string): ChangeWatch {
  const handlers = new Map<string, Set<() => void>>();
  let listening = false;
  let closed = false;
  let client: pg.Client | null = null;
  let retry: NodeJS.Timeout | null = null;
  let started = false;
  const clearAll = () => {
    for (const set of handlers.values()) for (const clear of set) clear();
  };

  const lost = (dead: pg.Client) => {
    if (client !== dead) return;
    listening = false;
    clearAll();
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
    const c = new (pgDriver().Client)({ connectionString: url, application_name: LISTENER_NAME });
    client = c;
    c.on("error", () => lost(c));
    c.on("end", () => lost(c));
    try {
      await c.connect();
      const schema = (await c.query<{ schema: string }>("select current_schema() as schema")).rows[0]!.schema;
      c.on("notification", (n) => {
        if (n.payload !== schema) return;
        for (const clear of handlers.get(n.channel) ?? []) clear();
      });
      for (const channel of handlers.keys()) await c.query(`listen ${channel}`);
      if (client !== c || closed) return;
      // Whatever changed while nobody listened is forgotten with the rest.
      clearAll();
      listening = true;
    } catch {
      lost(c);
    }
  }

  return {
    watch(channel, clear) {
      const known = handlers.get(channel);
      if (known) known.add(clear);
      else {
        handlers.set(channel, new Set([clear]));
        // A channel added after the connection listens: listened to as well (until then, not fresh).
        if (client !== null && listening) {
          listening = false;
          const c = client;
          c.query(`listen ${channel}`).then(
            () => {
              if (client === c) listening = true;
            },
            () => lost(c),
          );
        }
      }
      if (!started) {
        started = true;
        void listen();
      }
      return { check: () => listening };
    },
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
