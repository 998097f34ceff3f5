// PostgreSQL: the read model's marks are written once per statement, not once per row. A row trigger runs its
// function for every row a statement writes, and each of its inserts through the executor: a group of ten
// payments (one statement) ran some thirty of them, an invoice's status change two and each log line one,
// and marked the same invoice once per log line. The marks now come from statement triggers that read the
// statement's rows from its transition tables: one insert per documents table, each document once
// (`union`), whatever the number of rows. What is marked is unchanged: the documents named by the old and
// the new rows' columns.
//
// The owners' own documents rows (customers, invoices) follow their rows as before: laid down by an insert
// and removed by a delete, once per statement; an update that moves one (its id, store or creation time
// changed, which no payment does) keeps a row trigger, whose WHEN clause is evaluated without calling it.
// SQLite compiles its trigger bodies into the writing statement: nothing to do there.
//
// The rules are this migration's own copy, frozen with it (as 0017's).
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

type Views = "customer_views" | "invoice_views";

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
const NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

type Event = "insert" | "update" | "delete";
/** The transition tables an event's trigger has. */
const ROWS: Record<Event, string[]> = { insert: ["new_rows"], update: ["old_rows", "new_rows"], delete: ["old_rows"] };
const REFERENCING: Record<Event, string> = {
  insert: "referencing new table as new_rows",
  update: "referencing old table as old_rows new table as new_rows",
  delete: "referencing old table as old_rows",
};

/** One insert per documents table: the documents named by the statement's rows, each once. */
function marks(table: string, event: Event): string[] {
  const byViews = new Map<Views, string[]>();
  for (const [views, column] of RULES[table]!) byViews.set(views, [...(byViews.get(views) ?? []), column]);
  return [...byViews].map(([views, columns]) => {
    const selects = ROWS[event].flatMap((rows) => columns.map((column) => `select ${column} as doc_id from ${rows}`));
    // `union` keeps each id once; a single select needs its own `distinct`.
    const ids = selects.length === 1 ? selects[0]!.replace("select ", "select distinct ") : selects.join(" union ");
    return `insert into stale_${views} (doc_id, created_at) select doc_id, ${NOW_MS} from (${ids}) as ids;`;
  });
}

/** The owner's documents rows: laid down (empty, in page order) by an insert, removed by a delete. */
function ownerRows(views: Views | undefined, event: Event): string[] {
  if (views === undefined || event === "update") return [];
  if (event === "delete") return [`delete from ${views} v using old_rows o where v.id = o.id;`];
  return [
    `insert into ${views} (id, store_id, created_at, body) select id, store_id, created_at, null from new_rows ` +
      `on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at, body = null;`,
  ];
}

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  const run = (text: string) => sql.raw(text).execute(db);
  for (const table of Object.keys(RULES)) {
    const views = (Object.keys(OWNER_OF) as Views[]).find((v) => OWNER_OF[v] === table);
    await run(`drop trigger ${table}_marks on ${table}`);
    await run(`drop function ${table}_marks()`);
    const branches = (["insert", "update", "delete"] as const).map(
      (event) => `if tg_op = '${event.toUpperCase()}' then ${[...ownerRows(views, event), ...marks(table, event)].join(" ")} end if;`,
    );
    await run(`create function ${table}_marks() returns trigger language plpgsql as $$ begin ${branches.join(" ")} return null; end $$`);
    // A trigger with transition tables has one event.
    for (const event of ["insert", "update", "delete"] as const) {
      await run(`create trigger ${table}_marks_${event} after ${event} on ${table} ${REFERENCING[event]} for each statement execute function ${table}_marks()`);
    }
    if (views !== undefined) {
      await run(
        `create function ${table}_moved() returns trigger language plpgsql as $$ begin ` +
          `if old.id <> new.id then delete from ${views} where id = old.id; end if; ` +
          `insert into ${views} (id, store_id, created_at, body) values (new.id, new.store_id, new.created_at, null) ` +
          `on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at; ` +
          `return null; end $$`,
      );
      await run(
        `create trigger ${table}_moved after update on ${table} for each row ` +
          `when (old.id <> new.id or old.store_id <> new.store_id or old.created_at <> new.created_at) execute function ${table}_moved()`,
      );
    }
  }
}
