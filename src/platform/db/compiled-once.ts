// Queries of a fixed shape, built and compiled by Kysely once per database and then only bound with each
// run's values. Building a query's tree and compiling its text cost more than running a small statement on
// SQLite (about 20 µs a statement: on the money path, a seventh of a payment's time on the thread that
// answers webhooks). The list pages compile their key queries once per shape the same way (page-shapes.ts).
//
// A query is built with a placeholder for each value, `param(pick)`; compiling it finds every placeholder
// among the compiled parameters, in order, and a run puts `pick(input)` at each one's position. Every value
// must come through a placeholder: a plain value in the builder would be baked into every later run, so
// compiling one throws.
//
// SQLite, in a transaction: the statement is run on the connection at once, as a kept better-sqlite3
// statement, not through Kysely's executor (its connection provider, its promises: ~3–5 µs a statement on
// the thread that answers webhooks, and a payment runs about ten). The transaction holds the connection, and
// better-sqlite3 runs a statement to completion before returning, so this is what Kysely would do, sooner.
// Callers await each statement before the next, as everywhere. Outside a transaction the connection may be
// another's (a transaction in progress): those runs go through Kysely, which waits for it.
import { performance } from "node:perf_hooks";
import type SQLite from "better-sqlite3";
import type { Compilable, CompiledQuery, Kysely, QueryResult, Transaction } from "kysely";
import type { Database } from "./schema.ts";

/** A SQLite connection whose transactions run statements directly (openDatabase registers it). */
export interface DirectSqlite {
  handle: SQLite.Database;
  /** The connection's statement hook (OpenOptions.onQuery), told of direct runs too. */
  onQuery?: (sql: string, durationMs: number) => void;
}

/** By the Kysely adapter of the database (a transaction's executor has its database's). */
const directSqlite = new WeakMap<object, DirectSqlite>();

/** Lets transactions on `db` run statements directly on `direct.handle` (its one connection). */
export function runDirectlyInTransactions(db: Kysely<Database>, direct: DirectSqlite): void {
  directSqlite.set(db.getExecutor().adapter, direct);
}

/** The direct connection `db` may run a statement on now: a SQLite transaction's, or none. */
function directFor(db: Executor): DirectSqlite | undefined {
  return db.isTransaction ? directSqlite.get(db.getExecutor().adapter) : undefined;
}

/** Runs the statement with `parameters` on the connection at once, as Kysely's SQLite driver would; a failure rejects. */
function runDirect<R>(direct: DirectSqlite, statement: SQLite.Statement, parameters: readonly unknown[]): Promise<QueryResult<R>> {
  const started = performance.now();
  try {
    if (statement.reader) return Promise.resolve({ rows: statement.all(parameters) as R[] });
    const { changes, lastInsertRowid } = statement.run(parameters);
    return Promise.resolve({ rows: [], numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid) });
  } catch (err) {
    return Promise.reject(err);
  } finally {
    direct.onQuery?.(statement.source, performance.now() - started);
  }
}

/** A statement of fixed text (a savepoint's) run on `db`, directly when it can be. */
export function executeFixed(db: Executor, query: CompiledQuery): Promise<QueryResult<unknown>> {
  const direct = directFor(db);
  return direct === undefined ? db.executeQuery(query) : runDirect(direct, kept(direct, query.sql), query.parameters);
}

/** Statements kept per connection and text (a fixed, small set: the compiled-once queries and a few more). */
const keptStatements = new WeakMap<SQLite.Database, Map<string, SQLite.Statement>>();
function kept(direct: DirectSqlite, sql: string): SQLite.Statement {
  let byText = keptStatements.get(direct.handle);
  if (byText === undefined) keptStatements.set(direct.handle, (byText = new Map()));
  let statement = byText.get(sql);
  if (statement === undefined) byText.set(sql, (statement = direct.handle.prepare(sql)));
  return statement;
}

type Executor = Kysely<Database> | Transaction<Database>;

/** A value of a run, put in at execution: `pick` finds it in the run's input. */
export class Placeholder<I> {
  readonly pick: (input: I) => unknown;
  constructor(pick: (input: I) => unknown) {
    this.pick = pick;
  }
}

/** Stands for a value of the run's input in a query built once (typed as the value it stands for). */
export type Param<I> = <T>(pick: (input: I) => T) => T;

export const placeholder = <I>(pick: (input: I) => unknown): never => new Placeholder(pick) as never;

/** The placeholders of a part of the input (`get` finds the part in it). */
export function paramAt<I, T>(param: Param<I>, get: (input: I) => T): Param<T> {
  return (pick) => param((input) => pick(get(input)));
}

/** For each compiled parameter, where its value comes from; throws on a value that is not a placeholder. */
export function picksOf<I>(parameters: readonly unknown[], what: string): ((input: I) => unknown)[] {
  return parameters.map((p) => {
    if (p instanceof Placeholder) return (p as Placeholder<I>).pick;
    throw new Error(`query ${what}: a parameter that is not a placeholder (${String(p)}) would be the same in every run`);
  });
}

/** Runs the query on `db` (a transaction runs it on its connection) with the values `input` gives. */
export type CompiledOnce<I, R> = (db: Executor, input: I) => Promise<QueryResult<R>>;

/** A query built by `build` once per database (per dialect adapter: the SQL text is the dialect's). */
export function compiledOnce<I, R = unknown>(what: string, build: (db: Executor, param: Param<I>) => Compilable<R>): CompiledOnce<I, R> {
  const compiled = new WeakMap<object, { query: CompiledQuery<R>; picks: ((input: I) => unknown)[]; statement?: SQLite.Statement }>();
  return (db, input) => {
    const adapter = db.getExecutor().adapter;
    let c = compiled.get(adapter);
    if (c === undefined) {
      const query = build(db, placeholder as Param<I>).compile();
      c = { query, picks: picksOf<I>(query.parameters, what) };
      compiled.set(adapter, c);
    }
    const { query, picks } = c;
    const parameters = picks.map((pick) => pick(input));
    const direct = directFor(db);
    return direct === undefined ? db.executeQuery<R>({ ...query, parameters }) : runDirect<R>(direct, (c.statement ??= kept(direct, query.sql)), parameters);
  };
}

/**
 * A row of placeholders for an insert built once: one per column of `columns`, whose type lists every
 * column of the row (a column left out, or one too many, is a type error).
 */
export function paramRow<R extends object>(param: Param<R>, columns: Record<keyof R, true>): R {
  return Object.fromEntries(Object.keys(columns).map((c) => [c, param((row) => row[c as keyof R])])) as R;
}
