// Following the delivery log as it grows (`storefront deliveries tail`), by polling the database.
// A delivery is stamped with the time it arrived but committed when its plugin has finished (up to the
// plugin's wall time later), so each poll looks back `overlapMs` before the newest delivery seen and
// skips the ones already shown: a slow delivery that commits after faster, newer ones is still shown.
import { setTimeout as sleep } from "node:timers/promises";
import type { Cursor } from "../lib/list-query.ts";
import type { DeliveriesRepository, DeliveryFilters, DeliverySummary } from "./deliveries.repository.ts";

export interface FollowOptions {
  /** Show this many of the most recent deliveries first (oldest of them first). */
  backlog: number;
  intervalMs: number;
  /** How far back each poll looks for deliveries committed late. */
  overlapMs: number;
  signal: AbortSignal;
  now: () => number;
  onDelivery: (d: DeliverySummary) => void;
  /** Rows per query. */
  pageSize?: number;
}

export async function followDeliveries(repo: DeliveriesRepository, storeId: string, filters: DeliveryFilters, options: FollowOptions): Promise<void> {
  const pageSize = options.pageSize ?? 200;
  const seen = new Map<string, number>(); // id -> arrival time, for the ids inside the overlap window
  let newest = options.now();

  /** Reads forward from `newest - overlap`; marks every row seen, and hands on the unseen ones when `show`. */
  const drain = async (show: boolean) => {
    let after: Cursor = { createdAt: newest - options.overlapMs, id: "" };
    for (;;) {
      const rows = await repo.listForward(storeId, { ...filters, after, limit: pageSize });
      for (const d of rows) {
        const at = Date.parse(d.createdAt);
        if (!seen.has(d.id)) {
          seen.set(d.id, at);
          if (show) options.onDelivery(d);
        }
        if (at > newest) newest = at;
      }
      if (rows.length < pageSize) break;
      const last = rows.at(-1)!;
      after = { createdAt: Date.parse(last.createdAt), id: last.id };
    }
    for (const [id, at] of seen) if (at < newest - options.overlapMs) seen.delete(id);
  };

  // What is already committed is not news: only the backlog of it is shown.
  await drain(false);
  if (options.backlog > 0) {
    const { deliveries } = await repo.list(storeId, { ...filters, limit: options.backlog, after: null });
    for (const d of deliveries.reverse()) {
      seen.set(d.id, Date.parse(d.createdAt)); // marked, so the next poll does not show it a second time
      options.onDelivery(d);
    }
  }
  while (!options.signal.aborted) {
    await sleep(options.intervalMs, undefined, { signal: options.signal }).catch(() => {});
    if (options.signal.aborted) break;
    await drain(true);
  }
}
