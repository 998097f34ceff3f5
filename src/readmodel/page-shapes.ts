// A list page's key query, built by Kysely once per shape of the query rather than once per request.
// Building the AST and its SQL text cost ~0.2 ms per request, as much as reading a small page; and on
// PostgreSQL one SQL text per shape is what lets the server keep the statement and its plan.
//
// The shape is everything that changes the SQL text: which filters are present, how many statuses, and
// the page size, which is in the text as a literal (PostgreSQL estimates a `limit $n` at a tenth of the
// table, so the generic plan would always look worse than planning per run, and it would keep planning).
// The query is built once with a marker in place of each other value and compiled; each marker found among
// the compiled parameters says which value of the request goes at that position.
//
// At most MAX_SHAPES shapes per list are kept, each a statement prepared on every connection that runs it;
// further shapes (a client trying every page size) are built per request and prepared for one run, as
// before: bounded memory in this process and on the database server.
import { createHash } from "node:crypto";
import type { Compilable } from "kysely";
import type { PreparedStatement } from "../platform/db/database.ts";
import type { ListQuery } from "../lib/list-query.ts";

/** A value of the request, bound at execution: where it goes in the compiled parameters. */
class Marker {
  readonly value: (storeId: string, q: ListQuery) => unknown;
  constructor(value: (storeId: string, q: ListQuery) => unknown) {
    this.value = value;
  }
}

export const MAX_SHAPES = 64;

export interface BoundQuery {
  statement: PreparedStatement;
  params: unknown[];
}

/** The statements of a page of this shape (one, or several run together: see paging.ts, pageQuery). */
export type PageStatementsBuilder = (storeId: string, q: ListQuery) => readonly Compilable<unknown>[];

/** The text that names the shape of `q`: two queries with the same shape compile to the same SQL. */
export function shapeOf(q: ListQuery): string {
  const has = (v: unknown) => (v === null ? "-" : "+");
  return `${q.limit}${has(q.id)}${has(q.from)}${has(q.to)}${has(q.after)}${has(q.email)}${q.statuses === null ? "-" : q.statuses.length}`;
}

/**
 * Compiles each shape of a page's key query once (per list: `name` prefixes the statements' names) and
 * binds a request's values to it.
 */
export function pageShapes(name: string, build: PageStatementsBuilder): (storeId: string, q: ListQuery) => BoundQuery[] {
  type Binder = (storeId: string, q: ListQuery) => unknown;
  const shapes = new Map<string, { statement: PreparedStatement; binders: Binder[] }[]>();

  function compile(q: ListQuery, kept: boolean) {
    const m = (value: (storeId: string, q: ListQuery) => unknown) => new Marker(value) as unknown as never;
    const marked: ListQuery = {
      id: q.id === null ? null : m((_, r) => r.id),
      from: q.from === null ? null : m((_, r) => r.from),
      to: q.to === null ? null : m((_, r) => r.to),
      after: q.after === null ? null : { createdAt: m((_, r) => r.after!.createdAt), id: m((_, r) => r.after!.id) },
      email: q.email === null ? null : m((_, r) => r.email),
      statuses: q.statuses === null ? null : q.statuses.map((_, i) => m((_s, r) => r.statuses![i])),
      limit: q.limit,
    };
    return build(m((storeId) => storeId), marked).map((query) => {
      const compiled = query.compile();
      const binders = compiled.parameters.map((p): Binder => {
        if (p instanceof Marker) return p.value;
        // Builders put every value of the request through the query it is given; anything else would be
        // a value of this request baked into every later one.
        throw new Error(`page query ${name}: a parameter that is not a marker (${String(p)})`);
      });
      // Named by its text: one name is one text on every connection, whichever repository compiled it first.
      const digest = createHash("sha256").update(compiled.sql).digest("hex").slice(0, 16);
      return { statement: { name: kept ? `${name}_${digest}` : null, sql: compiled.sql }, binders };
    });
  }

  return (storeId, q) => {
    const key = shapeOf(q);
    let shape = shapes.get(key);
    if (shape === undefined) {
      const kept = shapes.size < MAX_SHAPES;
      shape = compile(q, kept);
      if (kept) shapes.set(key, shape);
    }
    return shape.map(({ statement, binders }) => ({ statement, params: binders.map((b) => b(storeId, q)) }));
  };
}
