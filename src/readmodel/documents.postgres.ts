// PostgreSQL: the read model's documents built by the server, as the very JSON text that JSON.stringify
// makes of toInvoice (invoice-documents.ts) and assembleCustomers (customer-documents.ts), byte for byte.
// The projector rebuilds documents with these in the statement that writes them (projector.postgres.ts):
// the source rows never travel to this process and the bodies never travel back, and nothing is parsed,
// assembled or serialized on the thread that answers webhooks. The JavaScript assemblers stay the
// definition (SQLite, and any document a read finds stale); a test builds every document both ways and
// compares the bytes (test/readmodel/documents-sql.postgres.test.ts).
//
// Where the server's text could differ from JavaScript's, the expression is null instead, and so is the
// whole document (`||` with a null is null): a null body is a document to assemble from the source rows on
// every read, so it is always right, only slower. That is a timestamp outside 1970–9999 (toISOString's
// other forms), an amount of 2^53/100 cents or more (a double's shortest text is no longer the amount's
// two decimals), and a null where JavaScript would compute with it (a number, a time, a flag). `trim_scale`
// needs PostgreSQL 13 (docs/deploy.md).
//
// Strings: to_json escapes as JSON.stringify does (\" \\ \b \f \n \r \t, other controls as \u00xx in
// lower case, nothing else); a database in UTF-8 holds no lone surrogates for either to escape.

/** A JSON string of a text column, or `null` for a null (JSON.stringify of a string or null). */
const text = (column: string) => `coalesce(to_json(${column})::text, 'null')`;
/** An integer column as a JSON number. */
const int = (column: string) => `(${column})::text`;
/** A boolean that the row stores as an integer (toCustomerInvoice: `!== 0`). */
const flag = (column: string) => `case when ${column} <> 0 then 'true' when ${column} = 0 then 'false' end`;
/** Epoch milliseconds as toISOString writes them (`"2024-05-01T12:00:00.000Z"`); days and milliseconds apart, so no float rounds them. */
const iso = (ms: string) =>
  `case when ${ms} >= 0 and ${ms} < 253402300800000 then '"' || to_char(timestamp '1970-01-01' + (${ms} / 86400000) * interval '1 day' + (${ms} % 86400000) * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"' end`;
/** Cents as the dollars centsToUsd gives (`1999` → `19.99`, `0` → `0`). */
const usd = (cents: string) => `case when abs(${cents}) < 90071992547409 then trim_scale(${cents}::numeric / 100)::text end`;
/** `{"key":value,…}` of [key, SQL text expression] pairs, in order. */
const object = (members: [string, string][]) => `'{' || ${members.map(([key, value], i) => `'${i === 0 ? "" : ","}"${key}":' || ${value}`).join(" || ")} || '}'`;
/** `[…]` of one object per row of a subquery, in its order. */
const array = (element: string, from: string, order: string) => `'[' || coalesce((select string_agg(${element}, ',' order by ${order}) from ${from}), '') || ']'`;

/** An invoice's summary members, as in a customer's list of invoices (toCustomerInvoice), of the invoice row `alias`. */
const customerInvoiceMembers = (a: string): [string, string][] => [
  ["id", text(`${a}.id`)],
  ["totalInUsd", usd(`${a}.total_cents`)],
  ["paymentMethod", text(`${a}.payment_method`)],
  ["displayedPaymentInfo", text(`${a}.displayed_payment_info`)],
  ["createdOnSessionId", text(`${a}.created_on_session_id`)],
  ["leftFeedback", flag(`${a}.left_feedback`)],
  ["status", text(`${a}.status`)],
  ["createdAt", iso(`${a}.created_at`)],
];

/** The invoice document (toInvoice) of the invoice row `i`. */
export const INVOICE_DOCUMENT = object([
  ...customerInvoiceMembers("i"),
  ["customerId", text("i.customer_id")],
  ["discordAccount", `case when i.discord_id is null then 'null' else ${object([["discordId", text("i.discord_id")], ["email", text("coalesce(i.discord_email, '')")]])} end`],
  ["invoiceFields", array(object([["key", text("f.key")], ["value", text("f.value")], ["type", text("f.type")]]), "invoice_fields f where f.invoice_id = i.id", "f.position")],
  [
    "invoiceItems",
    array(
      object([["productVariantId", text("t.product_variant_id")], ["quantity", int("t.quantity")], ["price", usd("t.price_cents")], ["couponId", text("t.coupon_id")]]),
      "invoice_items t where t.invoice_id = i.id",
      "t.position",
    ),
  ],
  ["invoiceLogs", array(object([["log", text("l.log")], ["type", text("l.type")], ["createdAt", iso("l.created_at")]]), "invoice_logs l where l.invoice_id = i.id", "l.id")],
]);

/**
 * The customer document (assembleCustomers) of the customer row `c`, with `d` its chat account (left
 * joined) and `o` its invoices (CUSTOMER_INVOICES).
 */
export const CUSTOMER_DOCUMENT = object([
  ["id", text("c.id")],
  ["totalOrders", int("o.orders")],
  ["lastOrderDate", `case when o.last is null then 'null' else ${iso("o.last")} end`],
  ["firstOrderDate", `case when o.first is null then 'null' else ${iso("o.first")} end`],
  ["totalSpent", usd("o.spent")],
  ["email", text("c.email")],
  ["createdAt", iso("c.created_at")],
  ["storeCustomerDiscordAccount", `case when d.discord_id is null then 'null' else ${object([["discordId", text("d.discord_id")], ["email", text("coalesce(d.email, '')")]])} end`],
  [
    "reviews",
    array(
      object([["id", text("r.id")], ["rating", int("r.rating")], ["text", text("r.text")], ["productId", text("r.product_id")], ["createdAt", iso("r.created_at")]]),
      "reviews r where r.customer_id = c.id",
      "r.created_at desc, r.id desc",
    ),
  ],
  [
    "customerSessions",
    array(
      object([["ip", text("s.ip")], ["userAgent", text("s.user_agent")], ["country", text("s.country")], ["lastUsedAt", iso("s.last_used_at")], ["createdAt", iso("s.created_at")]]),
      "customer_sessions s where s.customer_id = c.id",
      "s.created_at desc, s.id desc",
    ),
  ],
  ["invoices", "'[' || coalesce(o.list, '') || ']'"],
]);

/**
 * The invoices of the customer row `c`, as `o`, in one walk of them: their summaries in the list's order
 * (`list`, without the brackets), and the figures of the completed ones (`orders`, `spent`, `first`, `last`).
 */
export const CUSTOMER_INVOICES = `lateral (select string_agg(${object(customerInvoiceMembers("v"))}, ',' order by v.created_at desc, v.id desc) as list,
    count(*) filter (where v.status = 'completed') as orders, coalesce(sum(v.total_cents) filter (where v.status = 'completed'), 0) as spent,
    min(v.created_at) filter (where v.status = 'completed') as first, max(v.created_at) filter (where v.status = 'completed') as last
  from invoices v where v.customer_id = c.id) o`;

/** The documents of these ids (`$1`, an array) as `id, body`: those whose source row still exists. */
export const DOCUMENTS_OF = {
  invoice_views: `select i.id, ${INVOICE_DOCUMENT} as body from invoices i where i.id = any($1::text[])`,
  customer_views: `select c.id, ${CUSTOMER_DOCUMENT} as body from customers c left join customer_discord_accounts d on d.customer_id = c.id cross join ${CUSTOMER_INVOICES} where c.id = any($1::text[])`,
} as const;
