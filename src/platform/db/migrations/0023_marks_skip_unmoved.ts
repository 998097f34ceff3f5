// PostgreSQL: the read model's mark triggers (migration 0017) run only the statements an update needs. A
// trigger function's statements each run through the executor, even when their `where` is false: an
// invoice's status change ran six (the documents row moved, the old row's two marks, the new row's two marks
// where its documents differ) where two do the work. The same statements now sit behind plpgsql IFs, which
// are evaluated without the executor, so a status change runs two. What is marked is unchanged. SQLite
// compiles its trigger bodies into the writing statement: nothing to do there.
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

const mark = (views: Views, value: string) => `insert into stale_${views} (doc_id, created_at) values (${value}, ${NOW_MS});`;

function onInsert(table: string, views: Views | undefined): string[] {
  const owner = views === undefined ? [] : [`insert into ${views} (id, store_id, created_at, body) values (new.id, new.store_id, new.created_at, null) on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at, body = null;`];
  return [...owner, ...RULES[table]!.map(([v, column]) => mark(v, `new.${column}`))];
}

function onUpdate(table: string, views: Views | undefined): string[] {
  const owner =
    views === undefined
      ? []
      : [
          `if old.id <> new.id or old.store_id <> new.store_id or old.created_at <> new.created_at then`,
          `if old.id <> new.id then delete from ${views} where id = old.id; end if;`,
          `insert into ${views} (id, store_id, created_at, body) values (new.id, new.store_id, new.created_at, null) on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at;`,
          `end if;`,
        ];
  const old = RULES[table]!.map(([v, column]) => mark(v, `old.${column}`));
  const moved = RULES[table]!.map(([v, column]) => `if new.${column} <> old.${column} then ${mark(v, `new.${column}`)} end if;`);
  return [...owner, ...old, ...moved];
}

function onDelete(table: string, views: Views | undefined): string[] {
  return [...(views === undefined ? [] : [`delete from ${views} where id = old.id;`]), ...RULES[table]!.map(([v, column]) => mark(v, `old.${column}`))];
}

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const table of Object.keys(RULES)) {
    const views = (Object.keys(OWNER_OF) as Views[]).find((v) => OWNER_OF[v] === table);
    await sql
      .raw(
        `create or replace function ${table}_marks() returns trigger language plpgsql as $$ begin ` +
          `if tg_op = 'INSERT' then ${onInsert(table, views).join(" ")} end if; ` +
          `if tg_op = 'UPDATE' then ${onUpdate(table, views).join(" ")} end if; ` +
          `if tg_op = 'DELETE' then ${onDelete(table, views).join(" ")} end if; ` +
          `return null; end $$`,
      )
      .execute(db);
  }
}
