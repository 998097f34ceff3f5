// The database connection: embedded SQLite (better-sqlite3, WAL) by default, PostgreSQL (pg) for more than
// one machine. Both speak through the same Kysely<Database>, so repositories are written once.
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, type LogEvent, PostgresDialect, SqliteDialect, sql } from "kysely";
import type pg from "pg";
import type * as PgConnectionString from "pg-connection-string";
import type postgres from "postgres";
import type { Database } from "./schema.ts";
import { type WalCheckpointer, walCheckpointer } from "./wal-checkpointer.ts";
import { type AppliedMigration, type MigrationObserver, migrateToLatest, pendingMigrations } from "./migrate.ts";
import { withStatementCache } from "./statement-cache.ts";
import { runDirectlyInTransactions } from "./compiled-once.ts";

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
  /** Applies the pending migrations; returns those applied, with their durations. */
  migrate(observer?: MigrationObserver): Promise<AppliedMigration[]>;
  /** Migrations not yet applied to this database. */
  pendingMigrations(): Promise<string[]>;
  ping(): Promise<void>;
  /** SQLite (a file, OpenOptions.walCheckpoints): the thread that checkpoints the log under writes; else null. */
  walCheckpoints: WalCheckpointer | null;
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
  /**
   * The rows of a statement. Text columns named in `bytes` come as UTF-8 bytes where the driver can give
   * them so (SQLite; PostgreSQL through postgres.js, see OpenOptions.bytes), otherwise as strings.
   */
  all<R>(statement: PreparedStatement, params: readonly unknown[], bytes?: readonly string[]): Promise<R[]>;
}

export interface PreparedStatement {
  name: string | null;
  sql: string;
}

export function sqlitePrepared(handle: SQLite.Database): Prepared {
  const statements = new Map<string, SQLite.Statement>();
  return {
    // A column to be read as bytes is cast to a blob in the statement itself (better-sqlite3 gives a blob as a Buffer).
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

/** pg decodes every text value into a string: `bytes` columns come as strings (the main thread's fallback). */
function pgPrepared(pool: pg.Pool): Prepared {
  return {
    all: async <R>(statement: PreparedStatement, params: readonly unknown[]) => {
      const result = await pool.query(statement.name === null ? { text: statement.sql, values: params as unknown[] } : { name: statement.name, text: statement.sql, values: params as unknown[] });
      return result.rows as R[];
    },
  };
}

// The PostgreSQL drivers are loaded when a PostgreSQL database is opened: an SQLite service (the embedded
// default) never loads their ~60 modules.
// Each is kept once loaded: `require` of a package name resolves it again on every call (stat calls and
// package.json reads), and pg asks for a type parser for every column of every result.
const require = createRequire(import.meta.url);
let pgModule: typeof pg | undefined;
let postgresModule: typeof postgres | undefined;
let connectionStringModule: typeof PgConnectionString | undefined;
/** pg, loaded on first use. */
export const pgDriver = (): typeof pg => (pgModule ??= require("pg") as typeof pg);
const postgresJs = (): typeof postgres => (postgresModule ??= require("postgres") as typeof postgres);
const parseIntoClientConfig = (url: string) => (connectionStringModule ??= require("pg-connection-string") as typeof PgConnectionString).parseIntoClientConfig(url);

// int8 (bigint) and numeric come back from pg as strings; our int8 columns hold epoch milliseconds and
// cents, far inside Number's safe range, so they are parsed as numbers.
const INT8_OID = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID ? (v: string) => Number(v) : pgDriver().types.getTypeParser(oid, format ?? "text")) as typeof pg.types.getTypeParser,
};

/** The oids of the integer types, read as numbers (int8: epoch milliseconds and cents, as pgTypes). */
const PG_INTEGERS = new Set([20, 21, 23]);

/** postgres.js's connection options for DATABASE_URL, read by pg's own parser (see postgresJsPrepared). */
export function postgresJsOptions(url: string, genericPlans: boolean): postgres.Options<Record<string, postgres.PostgresType>> {
  const c = parseIntoClientConfig(url);
  const startup = [typeof c.options === "string" ? c.options : null, genericPlans ? "-c plan_cache_mode=force_generic_plan" : null].filter((o) => o !== null).join(" ");
  return {
    ...(c.host ? { host: c.host } : {}),
    ...(c.port ? { port: c.port } : {}),
    ...(c.database ? { database: c.database } : {}),
    ...(c.user ? { user: c.user } : {}),
    ...(typeof c.password === "string" ? { pass: c.password } : {}),
    // pg's `ssl: true` is TLS with Node's defaults (the certificate verified); an object is tls.connect's options.
    ssl: c.ssl === true ? {} : c.ssl || false,
    connection: { application_name: typeof c.application_name === "string" ? c.application_name : "storefront reader", ...(startup === "" ? {} : { options: startup }) },
  };
}

/**
 * PostgreSQL through postgres.js, one connection (OpenOptions.bytes). Connects as DATABASE_URL says, read
 * by pg's own parser so both drivers agree: host (or socket directory), port, database, user, password,
 * TLS (sslmode, sslrootcert, sslcert, sslkey), `options` and `application_name`. Values come as the
 * server sent them: `bytes` columns as Buffers, integers as numbers, other text as strings. A statement
 * with a name is prepared once on the connection (postgres.js keys it by its text); without one, for its
 * run only.
 *
 * postgres.js (3.4) counts a result's rows per connection and resets the count only when a statement
 * completes. A statement that fails part way through its rows (its connection terminated, a timeout, an
 * error on one row) leaves the count where it stopped, and the next statement's rows are placed after that
 * many empty slots (porsager/postgres#1119). The rows are read here skipping empty slots: a row is never
 * empty (an array of its values), so what remains is exactly the statement's rows, in order.
 */
function postgresJsPrepared(url: string, genericPlans: boolean): Prepared & { close(): Promise<void> } {
  const sql = postgresJs()({ ...postgresJsOptions(url, genericPlans), max: 1, prepare: true, fetch_types: false, onnotice: () => {} });
  return {
    all: async <R>(statement: PreparedStatement, params: readonly unknown[], bytes: readonly string[] = []) => {
      const result = await sql.unsafe(statement.sql, params as postgres.ParameterOrJSON<never>[], { prepare: statement.name !== null }).raw();
      const columns = result.columns.map((col) => ({ name: col.name, as: bytes.includes(col.name) ? "bytes" : PG_INTEGERS.has(col.type) ? "number" : "text" }));
      const rows: R[] = [];
      for (let r = 0; r < result.length; r++) {
        const values = result[r];
        if (values === undefined) continue;
        const row: Record<string, unknown> = {};
        for (let i = 0; i < columns.length; i++) {
          const value = values[i] as Buffer | null;
          const column = columns[i]!;
          row[column.name] = value === null ? null : column.as === "bytes" ? value : column.as === "number" ? Number(value.toString("latin1")) : value.toString("utf8");
        }
        rows.push(row as R);
      }
      return rows;
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

export interface OpenOptions {
  poolSize?: number;
  /**
   * PostgreSQL: `prepared` runs on a connection of its own through postgres.js rather than pg, for the
   * reader threads. pg decodes every text value into a JavaScript string (its binary mode is not
   * supported by its own parser), which the page then encoded back into bytes: a quarter of a reader's
   * time on an invoices page. postgres.js gives a row's values as the bytes the server sent (`raw`), and
   * sends a query while the previous one's rows are still being read (pipelining on one connection), so
   * the server works on the next page while the thread copies this one. The Kysely side (the rare
   * assembly of a missing document) stays on pg, connecting only when used.
   */
  bytes?: boolean;
  /**
   * PostgreSQL: plan each prepared statement once, without its values (`plan_cache_mode =
   * force_generic_plan`), for connections that run only the list pages' statements (the reader threads').
   * Left to itself the server keeps planning some of them per run, the `id` filter's union among them, whose
   * planning cost twice its running. The page size is a literal in those statements (page-shapes.ts), so a
   * generic plan is the same index walk (bench/README.md has the per-case comparison).
   */
  genericPlans?: boolean;
  /**
   * PostgreSQL: for connections whose every statement finds its rows by key (the payments' grouped reads,
   * the projector's passes): planned once, without their values, and never as a scan of a whole table
   * (BY_KEY_SETTINGS). A plan kept for the connection's life must not be one that only suited the tables'
   * size when it was made: a claims table planned while empty was hashed whole for every read once it held
   * thousands of claims (its statistics trail it; bench/README.md, seventeenth pass).
   */
  byKey?: boolean;
  /**
   * PostgreSQL: the commits of these connections do not wait for the write-ahead log to reach the disk
   * (`synchronous_commit = off`). Only for connections that write nothing a crash may lose: the read model's
   * documents, whose marks are deleted in the same transaction, so a pass lost in a crash is lost whole and
   * its marks make it run again (reads assemble a marked document meanwhile). A transaction's effects are
   * still visible to others only once committed; the order of commits is kept.
   */
  rebuildableWrites?: boolean;
  /**
   * SQLite: checkpoint the write-ahead log from a thread of its own once writes begin (wal-checkpointer.ts),
   * not inside the commits of this connection. For the connection that serves the writes.
   */
  walCheckpoints?: boolean;
  /**
   * SQLite: the savepoints of this connection's shared commits (durable.ts) keep the pages they would undo in
   * memory, not in a temporary file past 64 KiB, where each was a write(2): a fifth of a busy writer's time.
   * Its temporary tables and sorts stay in memory too, so only the connection that serves the writes asks
   * for it, not the reader threads', whose statements a client's filters shape.
   */
  savepointsInMemory?: boolean;
  /** Called with the text of every statement sent through Kysely, BEGIN and COMMIT included (tests count them). */
  onQuery?: (sql: string, durationMs: number) => void;
}

/**
 * PostgreSQL settings of the connections whose statements find their rows by key (`byKey`): a generic plan,
 * made once per statement and connection, and no sequential scan, hash join or merge join in it, so that
 * each row is reached through an index however few rows the tables held when the plan was made.
 */
export const BY_KEY_SETTINGS: Readonly<Record<string, string>> = {
  plan_cache_mode: "force_generic_plan",
  enable_seqscan: "off",
  enable_hashjoin: "off",
  enable_mergejoin: "off",
};

/** The URL with `-c setting=value` added to the connection's startup options (kept with any already there). */
function withStartupOption(url: string, option: string): string {
  const parsed = new URL(url);
  const options = parsed.searchParams.get("options");
  parsed.searchParams.set("options", options === null ? option : `${options} ${option}`);
  return parsed.toString();
}

function queryLog(options: OpenOptions): { log?: (event: LogEvent) => void } {
  const onQuery = options.onQuery;
  return onQuery === undefined ? {} : { log: (event) => onQuery(event.query.sql, event.queryDurationMillis) };
}

/** Which database: the embedded SQLite file, or a PostgreSQL URL (DATABASE_URL). */
export type DatabaseConfig = { kind: "sqlite"; file: string } | { kind: "postgres"; url: string };

export function openDatabase(database: DatabaseConfig, options: OpenOptions = {}): Db {
  if (database.kind === "postgres") {
    const settings = {
      ...(options.byKey ? BY_KEY_SETTINGS : options.genericPlans ? { plan_cache_mode: "force_generic_plan" } : {}),
      ...(options.rebuildableWrites ? { synchronous_commit: "off" } : {}),
    };
    const url = Object.entries(settings).reduce((u, [name, value]) => withStartupOption(u, `-c ${name}=${value}`), database.url);
    // A connection, once opened, stays for the process's life (pg closes idle ones after 10 s by default).
    // A new one is a new server process with empty caches that plans every statement of the money path
    // again: when traffic resumed after a lull, the pools were reopened all at once and the first second
    // of payments, and the reads beside them, waited on that work (bench/README.md, twenty-eighth pass).
    // Idle connections do not keep the process alive (a command's process ends when its work does).
    const pool = new (pgDriver().Pool)({ connectionString: url, max: options.poolSize ?? 10, idleTimeoutMillis: 0, allowExitOnIdle: true, types: pgTypes });
    // A client's connection can die at any time (failover, pooler restart, pg_terminate_backend). pg emits
    // 'error' on the client, checked out or idle, and an unheard 'error' ends the process. Heard here, the
    // query in flight fails (answered 503 database_unavailable) and the pool replaces the client.
    pool.on("error", () => {});
    pool.on("connect", (client) => {
      client.on("error", () => {});
      nameStatements(client);
    });
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), ...queryLog(options) });
    const bytes = options.bytes ? postgresJsPrepared(database.url, options.genericPlans ?? false) : null;
    return {
      kysely,
      dialect: "postgres",
      sqlite: null,
      pgPool: pool,
      prepared: bytes ?? pgPrepared(pool),
      migrate: (observer) => migrateToLatest(kysely as Kysely<unknown>, { dialect: "postgres" }, observer),
      pendingMigrations: () => pendingMigrations(kysely as Kysely<unknown>, { dialect: "postgres" }),
      ping: async () => {
        await sql`select 1`.execute(kysely);
      },
      walCheckpoints: null,
      close: async () => {
        await bytes?.close();
        await kysely.destroy();
        // Kysely ends the pool only if a statement of its own ever took a connection: one used through
        // `pgPool` or `prepared` alone was left open.
        if (!pool.ending) await pool.end();
      },
    };
  }

  if (database.file !== ":memory:") mkdirSync(path.dirname(path.resolve(database.file)), { recursive: true });
  const handle = new SQLite(database.file);
  handle.pragma("journal_mode = WAL");
  handle.pragma("synchronous = NORMAL");
  handle.pragma("foreign_keys = ON");
  handle.pragma("busy_timeout = 5000");
  if (options.savepointsInMemory === true) handle.pragma("temp_store = MEMORY");
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(handle) }), ...queryLog(options) });
  runDirectlyInTransactions(kysely, { handle, ...(options.onQuery === undefined ? {} : { onQuery: options.onQuery }) });
  const walCheckpoints = options.walCheckpoints === true && database.file !== ":memory:" ? walCheckpointer(handle, database.file) : null;
  return {
    kysely,
    dialect: "sqlite",
    sqlite: handle,
    pgPool: null,
    prepared: sqlitePrepared(handle),
    migrate: (observer) => migrateToLatest(kysely as Kysely<unknown>, { dialect: "sqlite" }, observer),
    pendingMigrations: () => pendingMigrations(kysely as Kysely<unknown>, { dialect: "sqlite" }),
    ping: async () => {
      await sql`select 1`.execute(kysely);
    },
    walCheckpoints,
    close: async () => {
      await walCheckpoints?.close();
      await kysely.destroy();
    },
  };
}

/** Statement texts given a name for the server to keep prepared, process-wide (beyond it, run unnamed). */
const MAX_NAMED_STATEMENTS = 1_000;
const statementNames = new Map<string, string>();
/** Parameters up to which a text is named on its first run; beyond (up to the second bound), once it recurs. */
const NAMED_AT_ONCE_MAX_PARAMS = 32;
const NAMED_IF_RECURRING_MAX_PARAMS = 1_024;
const RECURRING_RUNS = 3;
const MAX_COUNTED_TEXTS = 5_000;
const runsOfText = new Map<string, number>();
/** `select *`: its row type follows the table's columns, which a prepared plan must not see change. */
const SELECTS_ALL = /(?:select|,)\s*(?:"?\w+"?\.)?\*/i;

function nameFor(text: string, params: number): string | undefined {
  const named = statementNames.get(text);
  if (named !== undefined || statementNames.size >= MAX_NAMED_STATEMENTS || params > NAMED_IF_RECURRING_MAX_PARAMS || SELECTS_ALL.test(text)) return named;
  if (params > NAMED_AT_ONCE_MAX_PARAMS) {
    const runs = (runsOfText.get(text) ?? 0) + 1;
    if (runs < RECURRING_RUNS) {
      if (runsOfText.size >= MAX_COUNTED_TEXTS) runsOfText.clear();
      runsOfText.set(text, runs);
      return undefined;
    }
    runsOfText.delete(text);
  }
  const name = `sf${statementNames.size}`;
  statementNames.set(text, name);
  return name;
}

/**
 * PostgreSQL: statements sent with parameters are prepared once per connection under a name and then only
 * bound, as the SQLite side does with its statement cache: the server parses and plans a payment's
 * statements once per connection instead of on every payment (about a quarter of its CPU per payment,
 * bench/README.md). A text with up to 32 parameters is named on its first run; one with up to 1,024 once
 * it has run three times, so that batches whose texts vary with their length (the seed's) are named only
 * for the lengths that recur (the projector pads its document writes to a power of two for that: up to 513
 * parameters). Never named: statements without parameters (DDL, several commands in one text), and
 * `select *` (a column added by a rolling upgrade would change a prepared statement's row type; the
 * payment's writes name their columns even where they read them from arrays).
 */
function nameStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (text: unknown, values?: unknown, callback?: unknown) => {
    if (typeof text === "string" && Array.isArray(values) && values.length > 0) {
      const name = nameFor(text, values.length);
      if (name !== undefined) return query({ name, text, values }, callback);
    }
    return query(text, values, callback);
  };
}
