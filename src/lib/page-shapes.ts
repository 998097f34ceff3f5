// A list page's key query, built by Kysely once per shape of the query rather than once per request.
// Building the AST and its SQL text cost ~0.2 ms per request, as much as reading a small page; and on
// PostgreSQL one SQL text per shape is what lets the server keep the statement and its plan.
//
// The shape is everything that changes the SQL text: which filters are present, how many statuses.
// The query is built once with a marker in place of each value and compiled; each marker found among the
// compiled parameters says which value of the request goes at that position.
import { createHash } from "node:crypto";
import type { Compilable } from "kysely";
import type { PreparedStatement } from "../db/database.ts";
import type { ListQuery } from "./list-query.ts";

/** A value of the request, bound at execution: where it goes in the compiled parameters. */
class Marker {
  readonly value: (storeId: string, q: ListQuery) => unknown;
  constructor(value: (storeId: string, q: ListQuery) => unknown) {
    this.value = value;
  }
}

/**
 * The page size as the builders see it while the shape compiles. Builders use the limit only as
 * `limit + 1` (a page and the presence of the next one); that sum is this marker plus one, a number no
 * request can bind (a limit is 1 to MAX_LIMIT).
 */
const LIMIT_MARKER = -2_000_000_011;

export interface BoundQuery {
  statement: PreparedStatement;
  params: unknown[];
}

export type PageKeysBuilder = (storeId: string, q: ListQuery) => Compilable<unknown>;

/** The text that names the shape of `q`: two queries with the same shape compile to the same SQL. */
export function shapeOf(q: ListQuery): string {
  const has = (v: unknown) => (v === null ? "-" : "+");
  return `${has(q.id)}${has(q.from)}${has(q.to)}${has(q.after)}${has(q.email)}${q.statuses === null ? "-" : q.statuses.length}`;
}

/**
 * Compiles each shape of a page's key query once (per list: `name` prefixes the statements' names) and
 * binds a request's values to it.
 */
export function pageShapes(name: string, build: PageKeysBuilder): (storeId: string, q: ListQuery) => BoundQuery {
  const shapes = new Map<string, { statement: PreparedStatement; binders: ((storeId: string, q: ListQuery) => unknown)[] }>();

  function compile(q: ListQuery) {
    const m = (value: (storeId: string, q: ListQuery) => unknown) => new Marker(value) as unknown as never;
    const marked: ListQuery = {
      id: q.id === null ? null : m((_, r) => r.id),
      from: q.from === null ? null : m((_, r) => r.from),
      to: q.to === null ? null : m((_, r) => r.to),
      after: q.after === null ? null : { createdAt: m((_, r) => r.after!.createdAt), id: m((_, r) => r.after!.id) },
      email: q.email === null ? null : m((_, r) => r.email),
      statuses: q.statuses === null ? null : q.statuses.map((_, i) => m((_s, r) => r.statuses![i])),
      limit: LIMIT_MARKER,
    };
    const compiled = build(m((storeId) => storeId), marked).compile();
    const binders = compiled.parameters.map((p) => {
      if (p instanceof Marker) return p.value;
      if (p === LIMIT_MARKER + 1) return (_: string, r: ListQuery) => r.limit + 1;
      // Builders put every value of the request through the query it is given; anything else would be
      // a value of this request baked into every later one.
      throw new Error(`page query ${name}: a parameter that is not a marker (${String(p)})`);
    });
    // Named by its text: one name is one text on every connection, whichever repository compiled it first.
    const digest = createHash("sha256").update(compiled.sql).digest("hex").slice(0, 16);
    return { statement: { name: `${name}_${digest}`, sql: compiled.sql }, binders };
  }

  return (storeId, q) => {
    const key = shapeOf(q);
    let shape = shapes.get(key);
    if (shape === undefined) {
      shape = compile(q);
      shapes.set(key, shape);
    }
    return { statement: shape.statement, params: shape.binders.map((b) => b(storeId, q)) };
  };
}
