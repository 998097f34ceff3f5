// Generates one customer with everything hanging off it — chat account, sessions, reviews, invoices with
// items, fields and logs — as rows handed to a sink. All randomness comes from the seeded PRNG and the
// pools, so a seed reproduces the same rows.
//
// Shapes, on average per customer: 5 invoices, 2 reviews, 3 sessions (counts are geometric: many small
// customers, a few big ones); per invoice 1–3 items, 1–3 fields, 1–3 logs. Statuses are mostly completed.
import { type Prng, WeightedPool } from "./prng.ts";
import type { SeedPools } from "./seed.pools.ts";
import type { RowSink } from "./seed.sinks.ts";

export const SEED_AVERAGES = { invoices: 5, reviews: 2, sessions: 3 } as const;

const DAY = 86_400_000;

const STATUSES = new WeightedPool<string>([
  ["completed", 82],
  ["pending", 4],
  ["expired", 5],
  ["cancelled", 3],
  ["refunded", 3],
  ["disputed", 3],
]);

const PAYMENT_METHODS = new WeightedPool<string>([
  ["stripe", 55],
  ["paypal", 25],
  ["crypto", 12],
  ["cashapp", 8],
]);
const CARD_BRANDS = ["Visa", "Visa", "Visa", "Mastercard", "Mastercard", "American Express"];
const COINS = ["BTC", "ETH", "LTC", "USDT"];
const RATINGS = new WeightedPool<number>([
  [5, 55],
  [4, 22],
  [3, 10],
  [2, 5],
  [1, 8],
]);

/** Log lines per final status: what happened to the invoice, oldest first, with their types. */
const LOG_STORIES: Record<string, [string, string][][]> = {
  pending: [[["Invoice created (pending)", "info"]]],
  completed: [
    [
      ["Invoice created (pending)", "info"],
      ["Payment confirmed by the provider (completed)", "info"],
    ],
    [
      ["Invoice created (pending)", "info"],
      ["Payment confirmed by the provider (completed)", "info"],
      ["Product delivered by e-mail", "info"],
    ],
    [["Payment confirmed by the provider (completed)", "info"]],
    [
      ["Invoice created (pending)", "info"],
      ["Card declined, customer retried", "warning"],
      ["Payment confirmed by the provider (completed)", "info"],
    ],
  ],
  expired: [
    [
      ["Invoice created (pending)", "info"],
      ["Payment window elapsed (expired)", "info"],
    ],
  ],
  cancelled: [
    [
      ["Invoice created (pending)", "info"],
      ["Cancelled by the customer (cancelled)", "info"],
    ],
  ],
  refunded: [
    [
      ["Invoice created (pending)", "info"],
      ["Payment confirmed by the provider (completed)", "info"],
      ["Refunded by the merchant (refunded)", "warning"],
    ],
  ],
  disputed: [
    [
      ["Invoice created (pending)", "info"],
      ["Payment confirmed by the provider (completed)", "info"],
      ["Chargeback opened by the cardholder (disputed)", "error"],
    ],
  ],
};

export interface GenerateContext {
  rng: Prng;
  pools: SeedPools;
  sink: RowSink;
  storeId: string;
  /** Time span of the data: customers are created in [from, until], everything else after its customer. */
  from: number;
  until: number;
  total: number;
}

function displayedPaymentInfo(rng: Prng, method: string, email: string): string {
  switch (method) {
    case "stripe":
      return `${rng.pick(CARD_BRANDS)} •••• ${rng.digits(4)}`;
    case "paypal":
      return `PayPal ${email[0]}***${email.slice(email.indexOf("@"))}`;
    case "crypto": {
      const coin = rng.pick(COINS);
      return `${coin} ${rng.id("x").slice(2, 6)}…${rng.id("x").slice(2, 6)}`;
    }
    default:
      return `Cash App $${email.slice(0, Math.min(8, email.indexOf("@")))}`;
  }
}

/** Writes customer number `index` (0-based, in creation order) and all its rows. Returns rows written. */
export function generateCustomer(ctx: GenerateContext, index: number): number {
  let rows = 0;
  const w: Writer = {
    ctx,
    row: (table, values) => {
      ctx.sink.row(table, values);
      rows++;
    },
  };
  // In this order: each part draws from the one PRNG, so the order is what makes a seed reproducible.
  const customer = writeCustomer(w, index);
  const sessions = writeSessions(w, customer);
  writeReviews(w, customer);
  writeInvoices(w, customer, sessions);
  return rows;
}

/** The context, and a row writer that counts what it writes. */
interface Writer {
  ctx: GenerateContext;
  row: RowSink["row"];
}

interface Customer {
  id: string;
  email: string;
  createdAt: number;
  /** The linked chat account, when there is one. */
  discord: { id: string; email: string } | null;
}

function writeCustomer(w: Writer, index: number): Customer {
  const { rng, pools, storeId } = w.ctx;
  // Creation times are stratified over the span, so customers come out in creation order.
  const slot = (w.ctx.until - w.ctx.from) / w.ctx.total;
  const createdAt = Math.floor(w.ctx.from + (index + rng.float()) * slot);
  const id = rng.id("cus");
  const first = rng.pick(pools.firstNames);
  const last = rng.pick(pools.lastNames);
  const local = (rng.chance(0.5) ? `${first}.${last}` : `${first}${last[0]}`).toLowerCase().replace(/[^a-z0-9.]/g, "");
  const email = `${local}${index}@${pools.emailDomains.draw(rng)}`;
  w.row("customers", [id, storeId, email, createdAt]);

  let discord: Customer["discord"] = null;
  if (rng.chance(0.4)) {
    const discordId = rng.digits(18);
    const discordEmail = rng.chance(0.7) ? email : `${rng.pick(pools.usernames).toLowerCase().replace(/[^a-z0-9._]/g, "")}@${pools.emailDomains.draw(rng)}`;
    discord = { id: discordId, email: discordEmail };
    w.row("customer_discord_accounts", [id, storeId, discord.id, discord.email]);
  }
  return { id, email, createdAt, discord };
}

/** Sessions: the sign-up one, then later ones; each invoice is made on the latest session before it. */
function writeSessions(w: Writer, customer: Customer): { times: number[]; ids: string[] } {
  const { rng, pools, storeId, until } = w.ctx;
  const { createdAt } = customer;
  const life = until - createdAt;
  const sessionCount = 1 + rng.geometric(SEED_AVERAGES.sessions - 1);
  const times: number[] = [createdAt];
  for (let s = 1; s < sessionCount; s++) times.push(createdAt + Math.floor(rng.float() * life));
  times.sort((a, b) => a - b);
  const ids: string[] = [];
  const country = pools.countries.draw(rng);
  const userAgent = rng.pick(pools.userAgents);
  for (const t of times) {
    const id = rng.id("ses");
    ids.push(id);
    const ip = `${rng.between(1, 223)}.${rng.int(256)}.${rng.int(256)}.${rng.between(1, 254)}`;
    const lastUsedAt = t + Math.floor(rng.float() * Math.min(until - t, 30 * DAY));
    w.row("customer_sessions", [
      id,
      storeId,
      customer.id,
      ip,
      rng.chance(0.8) ? userAgent : rng.pick(pools.userAgents),
      rng.chance(0.9) ? country : pools.countries.draw(rng),
      lastUsedAt,
      t,
    ]);
  }
  return { times, ids };
}

function writeReviews(w: Writer, customer: Customer): void {
  const { rng, pools, storeId, until } = w.ctx;
  const life = until - customer.createdAt;
  const reviewCount = rng.geometric(SEED_AVERAGES.reviews);
  for (let r = 0; r < reviewCount; r++) {
    const rating = RATINGS.draw(rng);
    w.row("reviews", [
      rng.id("rev"),
      storeId,
      customer.id,
      rating,
      rng.pick(pools.reviewTexts[rating]!),
      pools.products.draw(rng),
      customer.createdAt + Math.floor(rng.float() * life),
      customer.createdAt,
    ]);
  }
}

function writeInvoices(w: Writer, customer: Customer, sessions: { times: number[]; ids: string[] }): void {
  const { rng, until } = w.ctx;
  const life = until - customer.createdAt;
  const invoiceCount = rng.geometric(SEED_AVERAGES.invoices);
  const invoiceTimes: number[] = [];
  for (let i = 0; i < invoiceCount; i++) invoiceTimes.push(customer.createdAt + Math.floor(rng.float() * life));
  invoiceTimes.sort((a, b) => a - b);
  let session = 0;
  for (const t of invoiceTimes) {
    while (session + 1 < sessions.times.length && sessions.times[session + 1]! <= t) session++;
    writeInvoice(w, customer, sessions.ids[session]!, t);
  }
}

/** One invoice made at `t`: its items, fields and log lines, then the invoice row with their total. */
function writeInvoice(w: Writer, customer: Customer, sessionId: string, t: number): void {
  const { rng, storeId } = w.ctx;
  const invoiceId = rng.id("inv");
  const status = STATUSES.draw(rng);
  const totalCents = writeItems(w, customer, invoiceId, t);
  writeFields(w, customer, invoiceId);
  const logAt = writeLogs(w, invoiceId, status, t);

  const method = PAYMENT_METHODS.draw(rng);
  const discord = customer.discord !== null && rng.chance(0.85) ? customer.discord : null;
  w.row("invoices", [
    invoiceId,
    storeId,
    customer.id,
    totalCents,
    method,
    displayedPaymentInfo(rng, method, customer.email),
    sessionId,
    status === "completed" && rng.chance(0.3) ? 1 : 0,
    status,
    discord?.id ?? null,
    discord?.email ?? null,
    t,
    logAt,
  ]);
}

/** The invoice's items, some with a coupon; returns their total in cents. */
function writeItems(w: Writer, customer: Customer, invoiceId: string, t: number): number {
  const { rng, pools, storeId } = w.ctx;
  let totalCents = 0;
  const itemCount = rng.between(1, 3);
  for (let position = 0; position < itemCount; position++) {
    const variant = pools.variants.draw(rng);
    const quantity = rng.chance(0.8) ? 1 : rng.between(2, 5);
    let price = variant.priceCents;
    let couponId: string | null = null;
    if (rng.chance(0.12)) {
      const coupon = rng.pick(pools.coupons);
      couponId = coupon.id;
      price = Math.round((price * (100 - coupon.percentOff)) / 100);
    }
    totalCents += price * quantity;
    w.row("invoice_items", [invoiceId, position, storeId, customer.id, variant.id, quantity, price, couponId, t, customer.createdAt]);
  }
  return totalCents;
}

function writeFields(w: Writer, customer: Customer, invoiceId: string): void {
  const { rng, pools } = w.ctx;
  const fieldCount = rng.between(1, 3);
  const templates = pools.fieldTemplates;
  const start = rng.int(templates.length);
  for (let position = 0; position < fieldCount; position++) {
    const template = templates[(start + position) % templates.length]!;
    w.row("invoice_fields", [invoiceId, position, template.key, template.value(rng, customer.email), template.type]);
  }
}

/** The log lines of one of the status's stories; returns the time of the last. */
function writeLogs(w: Writer, invoiceId: string, status: string, t: number): number {
  const { rng, until } = w.ctx;
  const stories = LOG_STORIES[status]!;
  const story = stories[rng.int(stories.length)]!;
  // Later lines follow within minutes, or within weeks for refunds and chargebacks.
  const gap = status === "disputed" || status === "refunded" ? 20 * DAY : 15 * 60_000;
  let logAt = t;
  for (let l = 0; l < story.length; l++) {
    if (l > 0) logAt = Math.min(until, logAt + 1000 + Math.floor(rng.float() * gap));
    const [log, type] = story[l]!;
    w.row("invoice_logs", [invoiceId, log, type, logAt]);
  }
  return logAt;
}
