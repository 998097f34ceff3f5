// The lean payment (docs/decisions/0007-lean-payments.md): a payment's transaction holds only the money
// path, and what derives from it follows after the commit.
//
// 1. Stale documents are marked, not emptied. A write to a source table inserts the ids of the documents it
//    makes stale into `stale_customer_views` / `stale_invoice_views` (insert-only: two payments of one
//    customer never wait on each other's row lock, as they did on the customer's document row and the
//    customer row the old triggers locked). A document with a mark is stale: the read path assembles it
//    from the source tables, and the projector rebuilds it after the commit and deletes the marks it saw.
//    An owner's insert still lays down its documents row (empty, in page order) and marks it.
// 2. Events are numbered after they commit: `events.seq` may be null until the sequencer gives the store's
//    next numbers to the committed events (the feed reads numbered events only), so no payment holds the
//    store's counter row across its commit.
// 3. PostgreSQL: a change to a plugin installation notifies `storefront_plugins`, so each process that
//    remembers a plugin's code and secrets forgets them at once (as for API keys, migration 0014).
//
// The rules below are this migration's own copy, frozen with it; the read model's module keeps the list
// the running code relies on, and a test checks the database's triggers against it.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

type Views = "customer_views" | "invoice_views";

/** Source table → the documents a row of it belongs to: [documents table, the row's column naming one]. */
const RULES: Record<string, [Views, string][]> = {
  customers: [["customer_views", "id"]],
  customer_discord_accounts: [["customer_views", "customer_id"]],
  reviews: [["customer_views", "customer_id"]],
  customer_sessions: [["customer_views", "customer_id"]],
  invoices: [
    ["invoice_views", "id"],
    ["customer_views", "customer_id"],
  ],
  invoice_items: [["invoice_views", "invoice_id"]],
  invoice_fields: [["invoice_views", "invoice_id"]],
  invoice_logs: [["invoice_views", "invoice_id"]],
};
const OWNER_OF: Record<Views, string> = { customer_views: "customers", invoice_views: "invoices" };

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  const run = (text: string) => sql.raw(text).execute(db);
  const pg = ctx.dialect === "postgres";
  const nowMs = pg ? "(extract(epoch from clock_timestamp()) * 1000)::bigint" : "cast(unixepoch('subsec') * 1000 as integer)";

  for (const views of ["customer_views", "invoice_views"] as const) {
    const pos = pg ? "pos bigserial primary key" : "pos integer primary key autoincrement";
    await run(`create table stale_${views} (${pos}, doc_id text not null, created_at bigint not null)`);
    await run(`create index stale_${views}_doc on stale_${views} (doc_id)`);
  }

  for (const table of Object.keys(RULES)) {
    if (pg) await run(`drop trigger if exists ${table}_stale on ${table}; drop function if exists ${table}_stale()`);
    else for (const event of ["insert", "update", "delete"]) await run(`drop trigger if exists ${table}_stale_${event}`);
    await createMarkTriggers(run, pg, table, nowMs);
  }
  // Documents emptied under the old rules and never refreshed: marked, so the projector builds them.
  for (const views of ["customer_views", "invoice_views"] as const) {
    await run(`insert into stale_${views} (doc_id, created_at) select id, ${nowMs} from ${views} where body is null`);
  }

  await numberEventsAfterCommit(run, pg);
  if (pg) await notifyPluginChanges(run);
}

/** The statements that mark the documents a row (`r`: new or old) belongs to. */
function marks(table: string, r: "new" | "old", nowMs: string, onlyIfMoved: boolean): string[] {
  return RULES[table]!.map(([views, column]) => {
    const insert = `insert into stale_${views} (doc_id, created_at)`;
    // An update marks the new row's documents only where they differ from the old row's (already marked).
    return onlyIfMoved ? `${insert} select new.${column}, ${nowMs} where new.${column} <> old.${column};` : `${insert} values (${r}.${column}, ${nowMs});`;
  });
}

/** The owner's own documents row: exists, with its store and creation time (the page order). */
function ownerRow(table: string, event: "insert" | "update" | "delete"): string[] {
  const views = (Object.keys(OWNER_OF) as Views[]).find((v) => OWNER_OF[v] === table);
  if (views === undefined) return [];
  if (event === "delete") return [`delete from ${views} where id = old.id;`];
  if (event === "insert") {
    return [`insert into ${views} (id, store_id, created_at, body) values (new.id, new.store_id, new.created_at, null) on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at, body = null;`];
  }
  return [
    `delete from ${views} where id = old.id and old.id <> new.id;`,
    `insert into ${views} (id, store_id, created_at, body) select new.id, new.store_id, new.created_at, null where old.id <> new.id or old.store_id <> new.store_id or old.created_at <> new.created_at ` +
      `on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at;`,
  ];
}

async function createMarkTriggers(run: (text: string) => Promise<unknown>, pg: boolean, table: string, nowMs: string): Promise<void> {
  const onInsert = [...ownerRow(table, "insert"), ...marks(table, "new", nowMs, false)];
  const onUpdate = [...ownerRow(table, "update"), ...marks(table, "old", nowMs, false), ...marks(table, "new", nowMs, true)];
  const onDelete = [...ownerRow(table, "delete"), ...marks(table, "old", nowMs, false)];
  if (!pg) {
    // SQLite's `where` in an insert … select needs a from-less select, which it has.
    const bodies = { insert: onInsert, update: onUpdate, delete: onDelete };
    for (const [event, body] of Object.entries(bodies)) {
      await run(`create trigger ${table}_marks_${event} after ${event} on ${table} for each row begin ${body.join(" ")} end`);
    }
    return;
  }
  await run(
    `create function ${table}_marks() returns trigger language plpgsql as $$ begin ` +
      `if tg_op = 'INSERT' then ${onInsert.join(" ")} end if; ` +
      `if tg_op = 'UPDATE' then ${onUpdate.join(" ")} end if; ` +
      `if tg_op = 'DELETE' then ${onDelete.join(" ")} end if; ` +
      `return null; end $$`,
  );
  await run(`create trigger ${table}_marks after insert or update or delete on ${table} for each row execute function ${table}_marks()`);
}

/**
 * `events.seq` null until the sequencer numbers the event; `pos` is the order events were written in, which
 * the sequencer numbers them by. The indexes on `seq` leave the unnumbered events out (`where seq is not
 * null`: every query on them compares `seq`), so writing an event touches them once, when it is numbered;
 * the unnumbered ones have a partial index of their own.
 */
async function numberEventsAfterCommit(run: (text: string) => Promise<unknown>, pg: boolean): Promise<void> {
  if (pg) {
    await run("alter table events alter column seq drop not null");
    await run("alter table events add column pos bigserial");
    await run("alter table events drop constraint events_store_seq");
    await run("drop index events_store_type_seq");
    await run("drop index events_store_invoice_seq");
  } else {
    // SQLite cannot drop a NOT NULL: the table is rebuilt, the write order kept.
    await run(
      `create table events_next (pos integer primary key autoincrement, "id" text not null unique, "store_id" text not null, "seq" bigint, "type" text not null, ` +
        `"data" text not null, "created_at" bigint not null, "invoice_id" text)`,
    );
    await run("insert into events_next (id, store_id, seq, type, data, created_at, invoice_id) select id, store_id, seq, type, data, created_at, invoice_id from events order by store_id, seq");
    await run("drop table events");
    await run("alter table events_next rename to events");
    await run(`create index "events_created" on "events" ("created_at")`);
  }
  await run("create unique index events_store_seq on events (store_id, seq) where seq is not null");
  await run("create index events_store_type_seq on events (store_id, type, seq) where seq is not null");
  await run("create index events_store_invoice_seq on events (store_id, invoice_id, seq) where seq is not null");
  await run("create index events_unsequenced on events (store_id, pos) where seq is null");
}

async function notifyPluginChanges(run: (text: string) => Promise<unknown>): Promise<void> {
  await run(
    "create function storefront_plugins_changed() returns trigger language plpgsql as $$ " +
      "begin perform pg_notify('storefront_plugins', tg_table_schema); return null; end $$",
  );
  await run("create trigger plugin_installations_changed after insert or update or delete or truncate on plugin_installations for each statement execute function storefront_plugins_changed()");
}
