// A list page's key query, built by Kysely once per shape of the query rather than once per request.
// Building the AST and its SQL text cost ~0.2 ms per request, as much as reading a small page; and on
// PostgreSQL one SQL text per shape is what lets the server keep the statement and its plan.
//
// The shape is everything that changes the SQL text: which filters are present, how many statuses, and
// the page size, which is in the text as a literal (PostgreSQL estimates a `limit $n` at a tenth of the
// table, so the generic plan would always look worse than planning per run, and it would keep planning).
// The query is built once with a placeholder in place of each other value and compiled (as the money path's
// statements are: platform/db/compiled-once.ts); each placeholder found among the compiled parameters says
// which value of the request goes at that position.
//
// At most MAX_SHAPES shapes per list are kept, each a statement prepared on every connection that runs it;
// further shapes (a client trying every page size) are built per request and prepared for one run, as
// before: bounded memory in this process and on the database server.
import { createHash } from "node:crypto";
import type { Compilable } from "kysely";
import type { PreparedStatement } from "../platform/db/database.ts";
import { picksOf, placeholder } from "../platform/db/compiled-once.ts";
import type { ListQuery } from "../lib/list-query.ts";

/** A request's values: what a page query's placeholders pick from. */
interface PageInput {
  storeId: string;
  q: ListQuery;
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
  const shapes = new Map<string, { statement: PreparedStatement; picks: ((input: PageInput) => unknown)[] }[]>();

  function compile(q: ListQuery, kept: boolean) {
    const m = (pick: (r: ListQuery) => unknown) => placeholder<PageInput>((input) => pick(input.q));
    const marked: ListQuery = {
      id: q.id === null ? null : m((r) => r.id),
      from: q.from === null ? null : m((r) => r.from),
      to: q.to === null ? null : m((r) => r.to),
      after: q.after === null ? null : { createdAt: m((r) => r.after!.createdAt), id: m((r) => r.after!.id) },
      email: q.email === null ? null : m((r) => r.email),
      statuses: q.statuses === null ? null : q.statuses.map((_, i) => m((r) => r.statuses![i])),
      limit: q.limit,
    };
    return build(placeholder<PageInput>((input) => input.storeId), marked).map((query) => {
      const compiled = query.compile();
      // Builders put every value of the request through the query it is given (picksOf throws otherwise).
      const picks = picksOf<PageInput>(compiled.parameters, `page ${name}`);
      // Named by its text: one name is one text on every connection, whichever repository compiled it first.
      const digest = createHash("sha256").update(compiled.sql).digest("hex").slice(0, 16);
      return { statement: { name: kept ? `${name}_${digest}` : null, sql: compiled.sql }, picks };
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
    return shape.map(({ statement, picks }) => ({ statement, params: picks.map((pick) => pick({ storeId, q })) }));
  };
}
