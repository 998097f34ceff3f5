// The cases, and what one round of a case sends to one server. Payment cases pay each round with a slice
// of their pending invoices of its own (slice 0 is the warm-up round's), so every delivery commits a
// change; a round ends after --duration or when its slice is used.
import { type Request, ignoreDelivery, payments, reads } from "./load.ts";
import type { Layout, Payments } from "./protocol.ts";

export const CASES = {
  ignore: "ignore, sandboxed Lua",
  "ignore-ts": "ignore, the plugin in plain TypeScript",
  push: "pushInvoice, one store, customers with 5 invoices",
  "push-stores": "pushInvoice, spread over the stores",
  "push-history": "pushInvoice, customers with a long history",
  "reads-alone": "list reads alone",
  "reads-burst": "list reads during a pushInvoice burst",
  "reads-webhooks": "list reads during an ignore burst at the same rate",
  burst: "pushInvoice burst (beside the reads)",
} as const;
export type CaseId = keyof typeof CASES;

/** The cases run in this order in every round; `burst` is measured with `reads-burst`. */
export const ROUND_ORDER: CaseId[] = ["ignore", "ignore-ts", "push", "push-stores", "push-history", "reads-alone", "reads-burst", "reads-webhooks"];

/** The cases that measure list reads (their rounds last --read-duration). */
export const isReadCase = (id: CaseId): boolean => id.startsWith("reads-");

export interface Stream {
  next: () => Request;
  /** Each request pays an invoice (the read model has something to catch up on). */
  pays?: boolean;
  amount?: number;
  rate?: number;
  connections: number;
}

/** What one round of a case sends: a stream of deliveries, of reads, or both at once. */
export interface RoundPlan {
  payments?: Stream;
  reads?: Stream;
}

export interface PlanSettings {
  /** Rounds counted, plus one warm-up round before them. */
  rounds: number;
  connections: number;
  readRate: number;
  readConnections: number;
  /** Payments per second beside the reads (reads-burst), open loop; 0 = as fast as they go (closed loop). */
  burstRate: number;
}

/** The round's share of a list: rounds + 1 equal slices, `round` 0 being the warm-up. */
function slice<T>(items: T[], round: number, settings: PlanSettings): T[] {
  const size = Math.floor(items.length / (settings.rounds + 1));
  return items.slice(round * size, (round + 1) * size);
}

function paying(targets: { storeId: string; invoiceId: string }[], settings: PlanSettings): Stream {
  // autocannon builds a request ahead on each connection: the slice's last `connections` are that margin.
  const amount = Math.max(1, targets.length - settings.connections);
  return { next: payments(targets), pays: true, amount, connections: Math.min(settings.connections, amount) };
}

/** A burst at a fixed rate: what payments at that rate do to reads, not two full loads sharing the cores. */
const burst = (stream: Stream, settings: PlanSettings): Stream => (settings.burstRate > 0 ? { ...stream, rate: settings.burstRate } : stream);

const ofStore = (p: Payments, round: number, settings: PlanSettings) => slice(p.invoiceIds, round, settings).map((invoiceId) => ({ storeId: p.storeId, invoiceId }));

/** Round-robin over the stores: the k-th payment goes to store k mod n, each store's invoices in turn. */
function acrossStores(stores: Payments[], round: number, settings: PlanSettings): { storeId: string; invoiceId: string }[] {
  const perStore = stores.map((p) => ofStore(p, round, settings));
  const out: { storeId: string; invoiceId: string }[] = [];
  const most = Math.min(...perStore.map((s) => s.length));
  for (let k = 0; k < most; k++) for (const s of perStore) out.push(s[k]!);
  return out;
}

export function planRound(id: CaseId, layout: Layout, round: number, settings: PlanSettings): RoundPlan | null {
  const readStream = (): Stream => {
    const { invoices, customers } = layout.reads.pages;
    // Invoices and customers pages alternate, each list walked from its first page to its last, again and again.
    const both: string[] = [];
    for (let i = 0; i < 2 * Math.max(invoices.length, customers.length); i++) both.push(i % 2 === 0 ? invoices[(i / 2) % invoices.length]! : customers[((i - 1) / 2) % customers.length]!);
    return { next: reads(both, layout.reads.key), rate: settings.readRate, connections: settings.readConnections };
  };
  switch (id) {
    case "ignore":
      return { payments: { next: ignoreDelivery(layout.push.storeId), connections: settings.connections } };
    case "ignore-ts":
      return layout.plainTs === null ? null : { payments: { next: ignoreDelivery(layout.plainTs), connections: settings.connections } };
    case "push":
      return { payments: paying(ofStore(layout.push, round, settings), settings) };
    case "push-stores":
      return { payments: paying(acrossStores(layout.stores, round, settings), settings) };
    case "push-history":
      return { payments: paying(ofStore(layout.history, round, settings), settings) };
    case "reads-alone":
      return { reads: readStream() };
    case "reads-burst":
      return { reads: readStream(), payments: burst(paying(ofStore(layout.reads, round, settings), settings), settings) };
    case "reads-webhooks":
      // The same reads beside deliveries the plugin ignores, at the burst's rate, to the same store: what any
      // stream of webhooks does to the reads (HTTP, the sandbox's run, the delivery's record), without a
      // payment's own work (its transaction, the read model's documents).
      return { reads: readStream(), payments: burst({ next: ignoreDelivery(layout.reads.storeId), connections: settings.connections }, settings) };
    case "burst":
      return null; // measured inside reads-burst
  }
}
