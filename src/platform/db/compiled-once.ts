// Queries of a fixed shape, built and compiled by Kysely once per database and then only bound with each
// run's values. Building a query's tree and compiling its text cost more than running a small statement on
// SQLite (about 20 µs a statement: on the money path, a seventh of a payment's time on the thread that
// answers webhooks). The list pages compile their key queries once per shape the same way (page-shapes.ts).
//
// A query is built with a placeholder for each value, `param(pick)`; compiling it finds every placeholder
// among the compiled parameters, in order, and a run puts `pick(input)` at each one's position. Every value
// must come through a placeholder: a plain value in the builder would be baked into every later run, so
// compiling one throws.
import type { Compilable, CompiledQuery, Kysely, QueryResult, Transaction } from "kysely";
import type { Database } from "./schema.ts";

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

type Executor = Kysely<Database> | Transaction<Database>;

/** Runs the query on `db` (a transaction runs it on its connection) with the values `input` gives. */
export type CompiledOnce<I, R> = (db: Executor, input: I) => Promise<QueryResult<R>>;

/** A query built by `build` once per database (per dialect adapter: the SQL text is the dialect's). */
export function compiledOnce<I, R = unknown>(what: string, build: (db: Executor, param: Param<I>) => Compilable<R>): CompiledOnce<I, R> {
  const compiled = new WeakMap<object, { query: CompiledQuery<R>; picks: ((input: I) => unknown)[] }>();
  return (db, input) => {
    const adapter = db.getExecutor().adapter;
    let c = compiled.get(adapter);
    if (c === undefined) {
      const query = build(db, placeholder as Param<I>).compile();
      c = { query, picks: picksOf<I>(query.parameters, what) };
      compiled.set(adapter, c);
    }
    const { query, picks } = c;
    return db.executeQuery<R>({ ...query, parameters: picks.map((pick) => pick(input)) });
  };
}

/**
 * A row of placeholders for an insert built once: one per column of `columns`, whose type lists every
 * column of the row (a column left out, or one too many, is a type error).
 */
export function paramRow<R extends object>(param: Param<R>, columns: Record<keyof R, true>): R {
  return Object.fromEntries(Object.keys(columns).map((c) => [c, param((row) => row[c as keyof R])])) as R;
}
