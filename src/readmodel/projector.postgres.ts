// The projector's PostgreSQL statements (projector.ts): a pass's lock of its documents with their marks, and
// its rebuild of the documents with those marks deleted; and the vacuums of the marks tables that keep the
// queue small.
import { CompiledQuery, type Kysely, type Transaction, sql } from "kysely";
import { DOCUMENTS_OF } from "./documents.postgres.ts";
import type { Database } from "../platform/db/schema.ts";
import { STALE_OF, type Views } from "./staleness.ts";

type Executor = Kysely<Database> | Transaction<Database>;

/** PostgreSQL: marks a projector deletes from a table before it vacuums that table (vacuumMarks). */
export const VACUUM_AFTER_MARKS = 1_000;
/** PostgreSQL: while a backlog of marks remains, a marks table is vacuumed at most this often. */
const VACUUM_DURING_BACKLOG_MS = 10_000;

/**
 * PostgreSQL: locks the candidates' documents rows, skipping those another projector holds, and reads the
 * marks of those it locked and of those whose row is gone (the owner was deleted: only its marks go), in
 * one statement. Its snapshot is taken before the locks: a pass that committed in between has deleted
 * marks this one still reads, and rebuilds from sources newer than them (deleting a deleted mark is nothing).
 * The marks are looked up by their index, document by document (`= any` of an array): a join to the
 * documents taken was planned as a hash join over every mark, and a backlog's table is megabytes. The gone
 * ones are an anti-join of their own, probed by id: under an `or` with the locked ones, the generic plan
 * (the pass's statements are planned once) hashed every documents row's id to test them.
 */
export function lockWithMarksQuery(views: Views, candidates: string[]) {
  const table = sql.table(views);
  return sql<{ ids: string[]; positions: string[] }>`with candidate as (select unnest(${candidates}::text[]) as id),
  locked as materialized (select v.id from ${table} v where v.id in (select id from candidate) for update skip locked),
  taken as (select id from locked union all select c.id from candidate c where not exists (select 1 from ${table} v where v.id = c.id))
  select array(select id from taken) as ids, array(select s.pos from ${sql.table(STALE_OF[views])} s where s.doc_id = any(array(select id from taken))) as positions`;
}

export async function lockWithMarks(tx: Transaction<Database>, views: Views, candidates: string[]): Promise<{ ids: string[]; positions: string[] }> {
  const { rows } = await lockWithMarksQuery(views, candidates).execute(tx);
  return rows[0]!;
}

/** The rebuild of each table's documents: built by the server from their sources, written, their marks deleted. */
const REBUILD_SQL: Record<Views, string> = {
  invoice_views: rebuildText("invoice_views"),
  customer_views: rebuildText("customer_views"),
};
function rebuildText(views: Views): string {
  return `with built as (${DOCUMENTS_OF[views]}),
  written as (update ${views} v set body = b.body from built b where v.id = b.id returning v.id, octet_length(v.body) as bytes),
  done as (delete from ${STALE_OF[views]} where pos = any($2::bigint[]))
select id, bytes from written`;
}

/**
 * PostgreSQL: the documents of these ids built by the server from their source rows (documents.postgres.ts)
 * and written, and the marks read for them deleted, in one statement: the rows and the bodies never travel
 * between the server and this process. A document whose owner is gone is not written (only its marks go).
 * One text per table whatever the number of ids (arrays), prepared once per connection. The sizes of the
 * bodies written, by id (a body the server left null counts 0).
 */
export async function rebuildDocuments(tx: Executor, views: Views, ids: string[], positions: string[]): Promise<Map<string, number>> {
  const { rows } = await tx.executeQuery<{ id: string; bytes: number | null }>(CompiledQuery.raw(REBUILD_SQL[views], [ids, positions]));
  return new Map(rows.map((r) => [r.id, Number(r.bytes ?? 0)]));
}

/**
 * PostgreSQL: vacuums a marks table. The marks tables are a queue: every write inserts marks and the
 * projector deletes them within a second, and a deleted row stays in the table and in its indexes until a
 * vacuum. Autovacuum visits a database once a minute at best (autovacuum_naptime), and not at all while its
 * workers are busy with the big tables of an import; meanwhile the projector's look at the oldest marks walks
 * every dead one, and so does the backlog gauge's count (540,000 dead marks under 200 live ones in the
 * webhook bench, 50-240 ms a statement). A vacuum of the small table that a healthy queue is takes a few
 * milliseconds. SKIP_LOCKED: a table another vacuum holds is left to it. A role that does not own the table
 * gets a warning, not an error, and the table is left to autovacuum.
 *
 * A vacuum reads each index of the table whole, and a vacuum gives the table's empty pages back but not an
 * index's: after a backlog (an import marks hundreds of thousands of documents) the indexes keep its size,
 * and every later vacuum of the small queue read 15 MB of them, 110 ms where 3 would do (bench/README.md,
 * twenty-third pass). So a vacuum that leaves the indexes far bigger than the marks it counted rebuilds them.
 */
export async function vacuumMarks(db: Kysely<Database>, views: Views, options: IndexRebuildOptions = {}): Promise<IndexesAfterVacuum> {
  const table = STALE_OF[views];
  await sql.raw(`vacuum (skip_locked) ${table}`).execute(db);
  if (options.rebuild === false || !(await indexesOutgrown(db, table))) return "kept";
  return (await rebuildMarksIndexes(db, table, options.timeoutMs ?? REBUILD_INDEXES_TIMEOUT_MS)) ? "rebuilt" : "failed";
}

/** What a vacuum of a marks table did to its indexes. */
export type IndexesAfterVacuum = "kept" | "rebuilt" | "failed";

export interface IndexRebuildOptions {
  /** False: outgrown indexes are left as they are this time (after a failed rebuild). */
  rebuild?: boolean;
  /** A rebuild still running after this long is cancelled (REBUILD_INDEXES_TIMEOUT_MS). */
  timeoutMs?: number;
}

/** Indexes of a marks table this size or smaller are never rebuilt. */
const REBUILD_INDEXES_FROM_BYTES = 1 << 20;
/** Index bytes per mark above which a marks table's indexes are rebuilt: about eight times a fresh index's. */
const REBUILD_INDEXES_PER_MARK = 512;
/**
 * A rebuild of a small table's indexes takes tens of milliseconds; one that runs this long is waiting for an
 * older transaction (a backup's, an analyst's query) while it holds the table against the projector's
 * vacuums (skipped meanwhile), so it is cancelled.
 */
const REBUILD_INDEXES_TIMEOUT_MS = 10_000;
/** After a rebuild failed or was cancelled, the projector leaves the table's indexes as they are this long. */
const REBUILD_RETRY_MS = 10 * 60_000;

/** Whether the table's indexes outgrew its marks, as its last vacuum counted them (pg_class.reltuples). */
async function indexesOutgrown(db: Kysely<Database>, table: string): Promise<boolean> {
  const { rows } = await sql<{ marks: number; bytes: string }>`select greatest(c.reltuples, 0)::float8 as marks,
    (select coalesce(sum(pg_relation_size(x.indexrelid)), 0) from pg_index x where x.indrelid = c.oid) as bytes
    from pg_class c where c.oid = to_regclass(${table})`.execute(db);
  const bytes = Number(rows[0]?.bytes ?? 0);
  return bytes > REBUILD_INDEXES_FROM_BYTES && bytes > REBUILD_INDEXES_PER_MARK * (rows[0]?.marks ?? 0);
}

/**
 * Rebuilds a marks table's indexes beside the old ones (CONCURRENTLY: the payments' marks go on being
 * written meanwhile), on one connection whose statements are cancelled after `timeoutMs`. A rebuild cut short
 * (cancelled, or the connection or the process lost) leaves an invalid copy named `…_ccnew` or `…_ccold`,
 * which every insert would go on maintaining: those are dropped first. Waiting for another process's rebuild
 * of the same table is waiting for its lock; by then its copy has taken the index's name. False when it
 * failed (a role that does not own the table, say): the indexes are as they were, only slower.
 */
async function rebuildMarksIndexes(db: Kysely<Database>, table: string, timeoutMs: number): Promise<boolean> {
  try {
    return await db.connection().execute(async (connection) => {
      await sql.raw(`set statement_timeout = ${Math.max(1, Math.round(timeoutMs))}`).execute(connection);
      try {
        const { rows } = await sql<{ name: string }>`select i.relname as name from pg_index x join pg_class i on i.oid = x.indexrelid
          where x.indrelid = to_regclass(${table}) and not x.indisvalid and i.relname ~ '_cc(new|old)[0-9]*$'`.execute(connection);
        for (const { name } of rows) await sql`drop index concurrently if exists ${sql.id(name)}`.execute(connection);
        await sql`reindex table concurrently ${sql.table(table)}`.execute(connection);
        return true;
      } finally {
        await sql.raw("reset statement_timeout").execute(connection);
      }
    });
  } catch {
    return false;
  }
}

/**
 * Counts the marks deleted per table and vacuums a table after every VACUUM_AFTER_MARKS, one vacuum at a
 * time. While a backlog remains (the pass was full), at most every VACUUM_DURING_BACKLOG_MS: a vacuum reads
 * the whole table, and a table of 300,000 waiting marks vacuumed after every 1,000 would cost more than the
 * dead rows it removes. A rebuild of the table's indexes that failed is not tried again for REBUILD_RETRY_MS.
 */
export function vacuumAfterDeletes(
  db: Kysely<Database>,
  now: () => number,
  vacuum: typeof vacuumMarks = vacuumMarks,
): { deleted(views: Views, marks: number, backlog: boolean): void } {
  const deleted: Record<Views, number> = { customer_views: 0, invoice_views: 0 };
  const lastAt: Record<Views, number> = { customer_views: -Infinity, invoice_views: -Infinity };
  const rebuildFrom: Record<Views, number> = { customer_views: -Infinity, invoice_views: -Infinity };
  const running = new Set<Views>();
  return {
    deleted(views, marks, backlog) {
      deleted[views] += marks;
      if (deleted[views] < VACUUM_AFTER_MARKS || running.has(views)) return;
      if (backlog && now() - lastAt[views] < VACUUM_DURING_BACKLOG_MS) return;
      deleted[views] = 0;
      lastAt[views] = now();
      running.add(views);
      // Not awaited: the next pass goes on meanwhile. A failure (the connection lost, the database closing)
      // leaves the table to the next threshold, or to autovacuum.
      vacuum(db, views, { rebuild: now() >= rebuildFrom[views] })
        .then((indexes) => {
          if (indexes === "failed") rebuildFrom[views] = now() + REBUILD_RETRY_MS;
        })
        .catch(() => {})
        .finally(() => running.delete(views));
    },
  };
}
