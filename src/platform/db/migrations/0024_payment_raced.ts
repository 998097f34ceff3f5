// PostgreSQL: a payment's writes go as one statement, committed on its own (no BEGIN and COMMIT around it)
// when commits are durable by default. What that statement writes must then stand or fall as one: when the
// event's claim was taken by another delivery meanwhile, or the invoice's status moved since it was read,
// nothing of it may stay. The statement calls this function in that case; the error it raises undoes the
// whole statement, and the caller reads the invoice again (its SQLSTATE, SFR01, tells it apart from a fault).
// SQLite runs a payment's writes in its group's transaction: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  await sql
    .raw(
      `create or replace function storefront_payment_raced() returns integer language plpgsql volatile as $$ ` +
        `begin raise exception 'the invoice or the event''s claim changed during the payment' using errcode = 'SFR01'; end $$`,
    )
    .execute(db);
}
