// The database connection: embedded SQLite (better-sqlite3, WAL) by default, PostgreSQL (pg) for more than
// one machine. Both speak through the same Kysely<Database>, so repositories are written once.
import { mkdirSync } from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import type { Config } from "../config.ts";
import type { Database } from "./schema.ts";
import { migrateToLatest, pendingMigrations } from "./migrate.ts";
import { withStatementCache } from "./statement-cache.ts";

export type Dialect = "sqlite" | "postgres";

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  /** Raw better-sqlite3 handle for bulk loading (seed); null on PostgreSQL. */
  sqlite: SQLite.Database | null;
  /** Raw pg pool for bulk loading (seed, COPY); null on SQLite. */
  pgPool: pg.Pool | null;
  /** Runs a statement that is prepared once per connection and then only bound (see Prepared). */
  prepared: Prepared;
  migrate(): Promise<void>;
  /** Migrations not yet applied to this database. */
  pendingMigrations(): Promise<string[]>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Statements run often with other values (the list pages' queries), prepared once per connection rather
 * than once per run: on SQLite a kept better-sqlite3 statement; on PostgreSQL a named prepared statement,
 * parsed once per connection and, once the server finds its generic plan as good as the per-run ones
 * (after five runs), planned once. `name` identifies the SQL text (one name, one text); a statement
 * without a name is prepared for its one run.
 */
export interface Prepared {
  all<R>(statement: PreparedStatement, params: readonly unknown[]): Promise<R[]>;
}

export interface PreparedStatement {
  name: string | null;
  sql: string;
}

export function sqlitePrepared(handle: SQLite.Database): Prepared {
  const statements = new Map<string, SQLite.Statement>();
  return {
    all: async <R>(statement: PreparedStatement, params: readonly unknown[]) => {
      let prepared = statement.name === null ? undefined : statements.get(statement.name);
      if (prepared === undefined) {
        prepared = handle.prepare(statement.sql);
        if (statement.name !== null) statements.set(statement.name, prepared);
      }
      return prepared.all(...params) as R[];
    },
  };
}

function pgPrepared(pool: pg.Pool): Prepared {
  return {
    all: async <R>(statement: PreparedStatement, params: readonly unknown[]) => {
      const result = await pool.query(statement.name === null ? { text: statement.sql, values: params as unknown[] } : { name: statement.name, text: statement.sql, values: params as unknown[] });
      return result.rows as R[];
    },
  };
}

// int8 (bigint) and numeric come back from pg as strings; our int8 columns hold epoch milliseconds and
// cents, far inside Number's safe range, so they are parsed as numbers.
const INT8_OID = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format ?? "text")) as typeof pg.types.getTypeParser,
};

export interface OpenOptions {
  poolSize?: number;
  /**
   * PostgreSQL: plan each prepared statement once, without its values (`plan_cache_mode =
   * force_generic_plan`), for connections that run only the list pages' statements (the reader threads').
   * Left to itself the server keeps planning some of them per run, the `id` filter's union among them, whose
   * planning cost twice its running. The page size is a literal in those statements (page-shapes.ts), so a
   * generic plan is the same index walk (bench/README.md has the per-case comparison).
   */
  genericPlans?: boolean;
}

/** The URL with `-c setting=value` added to the connection's startup options (kept with any already there). */
function withStartupOption(url: string, option: string): string {
  const parsed = new URL(url);
  const options = parsed.searchParams.get("options");
  parsed.searchParams.set("options", options === null ? option : `${options} ${option}`);
  return parsed.toString();
}

export function openDatabase(database: Config["database"], options: OpenOptions = {}): Db {
  if (database.kind === "postgres") {
    const url = options.genericPlans ? withStartupOption(database.url, "-c plan_cache_mode=force_generic_plan") : database.url;
    const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, types: pgTypes });
    // A client's connection can die at any time (failover, pooler restart, pg_terminate_backend). pg emits
    // 'error' on the client, checked out or idle, and an unheard 'error' ends the process. Heard here, the
    // query in flight fails (answered 503 database_unavailable) and the pool replaces the client.
    pool.on("error", () => {});
    pool.on("connect", (client) => {
      client.on("error", () => {});
    });
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return {
      kysely,
      dialect: "postgres",
      sqlite: null,
      pgPool: pool,
      prepared: pgPrepared(pool),
      migrate: async () => {
        await migrateToLatest(kysely as Kysely<unknown>, { dialect: "postgres" });
      },
      pendingMigrations: () => pendingMigrations(kysely as Kysely<unknown>, { dialect: "postgres" }),
      ping: async () => {
        await sql`select 1`.execute(kysely);
      },
      close: () => kysely.destroy(),
    };
  }

  if (database.file !== ":memory:") mkdirSync(path.dirname(path.resolve(database.file)), { recursive: true });
  const handle = new SQLite(database.file);
  handle.pragma("journal_mode = WAL");
  handle.pragma("synchronous = NORMAL");
  handle.pragma("foreign_keys = ON");
  handle.pragma("busy_timeout = 5000");
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(handle) }) });
  return {
    kysely,
    dialect: "sqlite",
    sqlite: handle,
    pgPool: null,
    prepared: sqlitePrepared(handle),
    migrate: async () => {
      await migrateToLatest(kysely as Kysely<unknown>, { dialect: "sqlite" });
    },
    pendingMigrations: () => pendingMigrations(kysely as Kysely<unknown>, { dialect: "sqlite" }),
    ping: async () => {
      await sql`select 1`.execute(kysely);
    },
    close: () => kysely.destroy(),
  };
}
