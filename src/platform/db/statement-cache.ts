// Kysely's SQLite driver prepares every query again; better-sqlite3's prepare costs about as much as
// running a small query. This hands Kysely the same database with a cache of prepared statements per
// SQL text (least recently used out). Reuse is safe: better-sqlite3 runs a statement to completion
// synchronously, and a statement still being iterated (`busy`) is never handed out twice.
import type SQLite from "better-sqlite3";
import type { SqliteDatabase, SqliteStatement } from "kysely";

export const STATEMENT_CACHE_SIZE = 256;

export function withStatementCache(handle: SQLite.Database, size = STATEMENT_CACHE_SIZE): SqliteDatabase {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => handle.close(),
    prepare(sql: string): SqliteStatement {
      const cached = cache.get(sql);
      if (cached !== undefined && !cached.busy) {
        cache.delete(sql);
        cache.set(sql, cached);
        return cached;
      }
      const statement = handle.prepare(sql);
      cache.set(sql, statement);
      if (cache.size > size) cache.delete(cache.keys().next().value!);
      return statement;
    },
  };
}
