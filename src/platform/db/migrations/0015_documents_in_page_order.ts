// The read model in page order: every customer and every invoice has a row in its documents table, with its
// store and creation time, indexed in page order, so an unfiltered page (or a date window) is one range scan
// of the documents themselves. Before, the page's keys came from the source table's index and each of its
// 101 documents was then looked up by id: on PostgreSQL that join was ~300 of the page's ~400 buffer hits,
// and the statement took 0.53 ms against 0.22 ms for the range scan (pgbench, an invoices page of 100).
//
// That needs a row for every element, so the triggers no longer delete a stale document: they empty it
// (`body` null), and the owner's own table keeps the row's existence, store and creation time exact in the
// same transaction (a row inserted, moved or deleted). A document left empty by a writer that did not
// refresh it is assembled from the source tables by the read path, as a missing one was: never stale.
//
// The documents tables are rebuilt, one row per customer and per invoice, with the documents they held. The
// empty ones (all of them for data older than migration 0009) are left to the read model: the read path
// assembles an empty document from the source tables, and migration 0017 marks every empty one stale, so the
// projector builds them after start-up. (Until release 0.2.0 this migration built them itself, with the
// application's code of the day; a migration is frozen the day it ships and imports nothing of the application.)
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";
import { CUSTOMER_OF, STALE_RULES } from "./0009_read_model.ts";

/** Each documents table and the source table whose rows it has one of each. */
const OWNERS = { customer_views: "customers", invoice_views: "invoices" } as const;
type Views = keyof typeof OWNERS;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  const run = (text: string) => sql.raw(text).execute(db);
  // The triggers name the documents tables: off while those are rebuilt.
  for (const table of Object.keys(STALE_RULES)) {
    if (ctx.dialect === "sqlite") for (const event of ["insert", "update", "delete"]) await run(`drop trigger if exists ${table}_stale_${event}`);
    else await run(`drop trigger if exists ${table}_stale on ${table}; drop function if exists ${table}_stale()`);
  }

  for (const [views, owner] of Object.entries(OWNERS) as [Views, string][]) {
    const next = `${views}_next`;
    await run(`create table ${next} (id text primary key, store_id text not null, created_at bigint not null, body text)`);
    if (ctx.dialect === "postgres") {
      // As migration 0013 set on the table this one replaces: documents stored uncompressed and inline.
      await run(`alter table ${next} alter column body set storage external`);
      await run(`alter table ${next} set (toast_tuple_target = 8160)`);
    }
    await run(`insert into ${next} (id, store_id, created_at, body) select s.id, s.store_id, s.created_at, v.body from ${owner} s left join ${views} v on v.id = s.id`);
    await run(`drop table ${views}`);
    await run(`alter table ${next} rename to ${views}`);
    if (ctx.dialect === "postgres") await run(`alter index ${next}_pkey rename to ${views}_pkey`);
    await run(`create index ${views}_page on ${views} (store_id, created_at desc, id desc)`);
  }

  for (const table of Object.keys(STALE_RULES)) await createDocumentTriggers(db, ctx.dialect, table);
  if (ctx.dialect === "sqlite") {
    await run("pragma analysis_limit = 1000");
    for (const views of Object.keys(OWNERS)) await run(`analyze ${views}_page`);
  } else {
    for (const views of Object.keys(OWNERS)) await run(`analyze ${views}`);
  }
}

/**
 * The statements that keep a source table's documents right after a row of it (`r`: new or old) changed.
 * The owner's own row: its document row exists, with its store and creation time, and empty. Any other
 * table's: the documents it belongs to emptied (a document already empty is left alone: a bulk insert of
 * children writes nothing more).
 */
function keep(table: string, r: "new" | "old", event: "insert" | "update" | "delete"): string[] {
  return STALE_RULES[table]!.flatMap(([views, column]) => {
    if (OWNERS[views] === table && column === "id") {
      if (event === "delete") return `delete from ${views} where id = ${r}.id;`;
      // An update's old row: the new row's statement covers the document (an id that changed: its old row is deleted apart).
      if (r === "old") return [];
      return (
        `insert into ${views} (id, store_id, created_at, body) values (${r}.id, ${r}.store_id, ${r}.created_at, null) ` +
        `on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at, body = null;`
      );
    }
    return `update ${views} set body = null where id = ${r}.${column} and body is not null;`;
  });
}

async function createDocumentTriggers(db: Kysely<unknown>, dialect: "sqlite" | "postgres", table: string): Promise<void> {
  const owns = Object.values(OWNERS).includes(table as never);
  if (dialect === "sqlite") {
    for (const event of ["insert", "update", "delete"] as const) {
      const body =
        event === "insert"
          ? keep(table, "new", "insert")
          : event === "delete"
            ? keep(table, "old", "delete")
            : // An owner row whose id changed leaves its old document row behind: deleted first.
              [...(owns ? [`delete from ${viewsOf(table)} where id = old.id and old.id <> new.id;`] : []), ...keep(table, "old", "update"), ...keep(table, "new", "update")];
      await sql.raw(`create trigger ${table}_stale_${event} after ${event} on ${table} for each row begin ${body.join(" ")} end`).execute(db);
    }
    return;
  }
  // PostgreSQL: the customer locked first, as migration 0009's triggers and the refresh do (one lock order).
  const lockCustomer = (r: string) => `perform 1 from customers where id = ${CUSTOMER_OF[table]!(r)} for no key update;`;
  const on = (r: "new" | "old", event: "insert" | "update" | "delete") => [lockCustomer(r), ...keep(table, r, event)].join(" ");
  const moved = owns ? `if old.id <> new.id then delete from ${viewsOf(table)} where id = old.id; end if; ` : "";
  await sql
    .raw(
      `create function ${table}_stale() returns trigger language plpgsql as $$ begin ` +
        `if tg_op = 'INSERT' then ${on("new", "insert")} end if; ` +
        `if tg_op = 'UPDATE' then ${on("old", "update")} ${moved}${on("new", "update")} end if; ` +
        `if tg_op = 'DELETE' then ${on("old", "delete")} end if; ` +
        `return null; end $$`,
    )
    .execute(db);
  await sql.raw(`create trigger ${table}_stale after insert or update or delete on ${table} for each row execute function ${table}_stale()`).execute(db);
}

function viewsOf(owner: string): Views {
  return (Object.keys(OWNERS) as Views[]).find((v) => OWNERS[v] === owner)!;
}
