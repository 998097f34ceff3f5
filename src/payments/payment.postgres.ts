// PostgreSQL: a payment's writes (payment.apply.ts) as one statement, and payments written together as one
// statement too. The statement takes each part as columns of arrays (unnest), one element per payment, so
// its text is the same for one payment or sixty-four, and it is prepared once per connection. The payments'
// reads (readPaymentSnapshots) go together the same way (statement-groups.ts), several at once: they lock
// nothing; a group read the server refused is read again one payment at a time, as the writes are.
//
// Why together: on PostgreSQL the writes' per-row work is small next to what every statement costs the
// server: parsing and planning aside, opening some ten tables and thirty indexes (more locks than a backend
// keeps on its fast path), queuing the triggers, and the commit. Measured on this statement, 32 connections
// writing one payment each cost the server ~1,100–1,500 µs a payment, one connection writing sixteen at a
// time ~200 µs (bench/README.md, "twelfth pass"). So the payments whose writes are ready while a statement
// is running wait for it and go as the next one; each promise resolves only once its statement committed.
//
// All or nothing: every claim must be taken and every compare-and-set must change its invoice, or the
// statement fails and nothing of it stays. A claim another delivery took is the claims' unique index
// refusing the insert (a plain insert: ON CONFLICT DO NOTHING costs every claim a speculative insertion,
// a probe of the index before the insert and a second WAL record after it, for a race that is rare); a
// compare-and-set that found the status moved is storefront_payment_raced() (migration 0024). One payment
// that raced (or that the server refused for any other reason) must not take the others with it: the group
// is then written again one payment per statement, and each hears its own outcome. A broken connection
// leaves the statement's commit unknown: the whole group hears that error, as a payment alone would.
//
// The events are numbered for the feed in the statement too, when their store's counter is free: the counter
// row is locked with SKIP LOCKED and incremented by the group's events of that store, which take the numbers
// in order; its lock is held to the statement's commit, as the sequencer holds it to its own, so a store's
// numbers still commit in increasing order (docs/decisions/0004-event-feed-order.md). A counter that another
// transaction holds (the sequencer, another process's payments), or that does not exist yet (the store's
// first event), is not waited for: those events are written without a number and the sequencer numbers
// them after the commit. Numbering here spares each event a second write of its row and indexes.
import { CompiledQuery, type Kysely, type Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import type { DeliveryRow } from "./deliveries.repository.ts";
import type { Change, ClaimRow, LogRow, WriteValues, Written } from "./payment.writes.ts";
import type { NewEventRow } from "../events/events.repository.ts";
import { type InvoiceSnapshot, type PaymentKey, readPaymentSnapshots } from "../invoices/invoices.repository.ts";
import { eachAlone, type Queued, statementGroups } from "../platform/db/statement-groups.ts";

type Executor = Kysely<Database> | Transaction<Database>;

/** Payments in one statement at most. */
const MAX_GROUP = 64;
/**
 * Write statements running at once; the payments ready meanwhile form the next group. One: two halved the
 * groups and cost the server more per payment (bench/README.md, "twelfth pass").
 */
const MAX_WRITES_IN_FLIGHT = 1;
/**
 * Read statements running at once. One: planned once (`reads`), a group's read takes a fraction of a
 * millisecond, and the payments ready meanwhile make a larger next group. Two at a time made groups of
 * three and cost more per payment on both sides (bench/README.md, "seventeenth pass").
 */
const MAX_READS_IN_FLIGHT = 1;

/** SQLSTATE of storefront_payment_raced(): a compare-and-set was lost, nothing written. */
const PAYMENT_RACED = "SFR01";
/** A unique violation of the claims' index: another delivery of the event claimed it, nothing written. */
const CLAIM_TAKEN = { code: "23505", constraint: "applied_events_pk" };
const lostRace = (err: { code?: unknown; constraint?: unknown }) => err.code === PAYMENT_RACED || (err.code === CLAIM_TAKEN.code && err.constraint === CLAIM_TAKEN.constraint);
/** An error the server sent about the statement (five characters), not the socket's (ECONNRESET, …). */
const isSqlState = (code: unknown) => typeof code === "string" && /^[0-9A-Z]{5}$/.test(code);

/** A part of the writes: its rows in a group, and each column's PostgreSQL type (every column of the row). */
interface Part<R> {
  rows(v: WriteValues): R[];
  types: Record<keyof R & string, string>;
}
const part = <R>(rows: (v: WriteValues) => R | R[] | null, types: Record<keyof R & string, string>): Part<R> => ({
  rows: (v) => {
    const r = rows(v);
    return r === null ? [] : Array.isArray(r) ? r : [r];
  },
  types,
});

/** The parts, in the order of their parameters: one array parameter per column. */
const PARTS = [
  part<ClaimRow>((v) => v.claim, { store_id: "text", plugin_name: "text", event_key: "text", delivery_id: "text", invoice_id: "text", created_at: "bigint" }),
  part<Change>((v) => v.change, { store_id: "text", invoice_id: "text", status_from: "text", status_to: "text", at: "bigint" }),
  part<LogRow>((v) => v.lines, { invoice_id: "text", log: "text", type: "text", created_at: "bigint" }),
  part<NewEventRow>((v) => v.event, { id: "text", store_id: "text", type: "text", data: "text", invoice_id: "text", created_at: "bigint" }),
  part<DeliveryRow>((v) => v.record, {
    id: "text",
    store_id: "text",
    plugin_name: "text",
    plugin_version: "int",
    replay_of: "text",
    method: "text",
    headers: "text",
    query: "text",
    body: "bytea",
    body_bytes: "bigint",
    outcome: "text",
    result: "text",
    error: "text",
    logs: "text",
    fetches: "text",
    invoice_id: "text",
    transition: "text",
    duration_ms: "float8",
    response_status: "int",
    response_body: "text",
    event_id: "text",
    event_type: "text",
    created_at: "bigint",
  }),
] as Part<Record<string, unknown>>[];

/** A part's column names and its `$n::type[]` parameters (the first of them alone, for its length; each by column). */
interface Columns {
  names: string;
  params: string;
  first: string;
  param: Record<string, string>;
}
let next = 1;
const [claim, change, lines, event, record] = PARTS.map((p): Columns => {
  const param = Object.fromEntries(Object.entries(p.types).map(([column, type]) => [column, `$${next++}::${type}[]`]));
  const params = Object.values(param);
  return { names: Object.keys(p.types).join(", "), params: params.join(", "), first: params[0]!, param };
}) as [Columns, Columns, Columns, Columns, Columns];
const eventColumns = event.names
  .split(", ")
  .map((name) => `e.${name}`)
  .join(", ");

/**
 * The statement. Every WITH clause runs, the claims first (the result reads them first): a payment that races
 * another delivery of its event waits on that claim before it touches the invoice. The lines keep their order
 * (ordinality: the invoice's log is read in id order); the events take their numbers from their store's counter when it was free (counters, numbered:
 * in the group's order, null otherwise); the fan-out queues each event for its store's enabled endpoints that
 * want its type (types is a space-separated list, "" = all), as fanOutInsert does for SQLite.
 */
const WRITE_SQL = `with claim as (
  insert into applied_events (${claim.names}) select ${claim.names} from unnest(${claim.params}) as c(${claim.names}) returning 1
), cas as (
  update invoices i set status = c.status_to, updated_at = c.at from unnest(${change.params}) as c(${change.names})
  where i.id = c.invoice_id and i.store_id = c.store_id and i.status = c.status_from returning 1
), lines as (
  insert into invoice_logs (${lines.names})
  select ${lines.names} from unnest(${lines.params}) with ordinality as l(${lines.names}, n) order by n
), counted as (
  select store_id, count(*) as n from unnest(${event.param.store_id}) as e(store_id) group by store_id
), counters as (
  select q.store_id from event_sequences q where q.store_id in (select store_id from counted) order by q.store_id for update skip locked
), numbered as (
  update event_sequences q set last_seq = q.last_seq + c.n from counted c
  where q.store_id = c.store_id and q.store_id in (select store_id from counters) returning q.store_id, q.last_seq - c.n as first
), event as (
  insert into events (${event.names}, seq)
  select ${eventColumns}, n.first + row_number() over (partition by e.store_id order by e.ord)
  from unnest(${event.params}) with ordinality as e(${event.names}, ord) left join numbered n on n.store_id = e.store_id order by e.ord
), fan_out as (
  insert into event_deliveries (id, store_id, event_id, endpoint_id, status, attempts, next_attempt_at, claim_token, manual, created_at, updated_at)
  select 'edl_' || lpad(to_hex(f.created_at), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 16), e.store_id, f.id, e.id, 'pending', 0, f.created_at, null, 0, f.created_at, f.created_at
  from unnest(${event.params}) as f(${event.names})
  join event_endpoints e on e.store_id = f.store_id
  where e.enabled = 1 and (e.types = '' or strpos(' ' || e.types || ' ', ' ' || f.type || ' ') > 0)
  returning endpoint_id
), record as (
  insert into deliveries (${record.names}) select ${record.names} from unnest(${record.params}) as r(${record.names})
)
select case when (select count(*) from claim) = cardinality(${claim.first})
  and (select count(*) from cas) = cardinality(${change.first}) then 1 else storefront_payment_raced() end as applied,
  (select coalesce(json_agg(endpoint_id), '[]'::json) from fan_out) as endpoints`;

/** The statement's parameters for a group: each part's columns, one element per row of the part. */
function parameters(group: readonly WriteValues[]): unknown[][] {
  return PARTS.flatMap((p) => {
    const rows = group.flatMap(p.rows);
    return Object.keys(p.types).map((column) => rows.map((r) => r[column]));
  });
}

/** Writes a group's payments in one statement (in `db`'s own commit, or in the caller's transaction). */
export async function writeTogether(db: Executor, group: readonly WriteValues[]): Promise<Written> {
  try {
    const { rows } = await db.executeQuery<{ endpoints: string[] }>(CompiledQuery.raw(WRITE_SQL, parameters(group)));
    return { claimed: true, changed: true, endpoints: rows[0]!.endpoints };
  } catch (err) {
    if (lostRace(err as { code?: unknown; constraint?: unknown })) return { claimed: false, changed: false, endpoints: [] };
    throw err;
  }
}

/** PostgreSQL: a payment's read and its writes, each sent with those of the payments ready beside it. */
export interface PaymentStatements {
  /** readPaymentSnapshot, in one statement with the reads ready together. */
  read(key: PaymentKey): Promise<InvoiceSnapshot | null>;
  /** writeTogether, in one statement (and commit) with the writes ready together. */
  write(values: WriteValues): Promise<Written>;
}

/**
 * `reads`: where the grouped reads run (by default `db`). The service gives them a pool whose statements are
 * planned once, without their values, and by key (database.ts, BY_KEY_SETTINGS): the server otherwise
 * planned the read again for every group, its estimate following the arrays' length (a custom plan every
 * run, seen in pg_prepared_statements under payments). test/payments/payment-reads.plans.test.ts checks
 * that plan.
 */
export function postgresPaymentStatements(db: Kysely<Database>, reads: Kysely<Database> = db): PaymentStatements {
  /**
   * A group's read; when the server refused it (an error it names with a SQLSTATE), each payment's read
   * alone, so that whatever one payment brought cannot fail the others' (the writes do the same). A broken
   * connection is heard by the whole group.
   */
  async function readGroup(group: Queued<PaymentKey, InvoiceSnapshot | null>[]): Promise<void> {
    try {
      const snapshots = await readPaymentSnapshots(
        reads,
        group.map((q) => q.input),
      );
      group.forEach((q, i) => q.resolve(snapshots[i]!));
      return;
    } catch (err) {
      if (group.length === 1 || !isSqlState((err as { code?: unknown }).code)) throw err;
    }
    await eachAlone(group, async (key) => (await readPaymentSnapshots(reads, [key]))[0]!);
  }
  const read = statementGroups(readGroup, { maxGroup: MAX_GROUP, maxInFlight: MAX_READS_IN_FLIGHT });

  /**
   * A group's statement; when the server refused it (a lost claim or compare-and-set, or any error it names
   * with a SQLSTATE: nothing of the statement stayed), each of its payments alone, with its own outcome.
   * When the connection failed instead, whether the statement committed is unknown: every payment of the
   * group hears that error, as one payment alone would (the webhook answers 503, the provider retries, and
   * the retry finds the event applied or not).
   */
  async function writeGroup(group: Queued<WriteValues, Written>[]): Promise<void> {
    if (group.length > 1) {
      try {
        const written = await writeTogether(
          db,
          group.map((q) => q.input),
        );
        if (written.claimed) {
          for (const q of group) q.resolve(written);
          return;
        }
      } catch (err) {
        // Thrown: statementGroups has every payment of the group hear it.
        if (!isSqlState((err as { code?: unknown }).code)) throw err;
      }
    }
    await eachAlone(group, (values) => writeTogether(db, [values]));
  }

  return { read, write: statementGroups(writeGroup, { maxGroup: MAX_GROUP, maxInFlight: MAX_WRITES_IN_FLIGHT }) };
}
