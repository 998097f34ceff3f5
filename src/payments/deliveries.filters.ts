// The delivery log's filters as users write them (admin API query and command-line options): outcomes as
// a comma-separated list, and time bounds as ISO 8601 or as a duration back from now (`1h`, `30m`, `7d`).
// Every mistake names the parameter at fault.
import { AppError } from "../errors.ts";
import { parseIsoDate } from "../lib/list-query.ts";
import { DELIVERY_OUTCOMES, type DeliveryFilters, type DeliveryOutcome } from "./deliveries.repository.ts";

export interface DeliveryFilterInput {
  pluginName?: string | undefined;
  outcome?: string | undefined;
  invoiceId?: string | undefined;
  eventId?: string | undefined;
  eventType?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const DURATION = /^(\d{1,9})([smhdw])$/;

/** ISO 8601 (a bare date is the start of that UTC day for `since`, its end for `until`) or a duration ago. */
export function parseTimeBound(text: string, now: number, bound: "since" | "until"): number | null {
  const d = DURATION.exec(text.trim());
  if (d) return now - Number(d[1]) * UNIT_MS[d[2]!]!;
  return parseIsoDate(text.trim(), bound === "until");
}

export function parseDeliveryFilters(input: DeliveryFilterInput, now: number): DeliveryFilters {
  const filters: DeliveryFilters = {};
  if (input.pluginName !== undefined && input.pluginName !== "") filters.pluginName = input.pluginName;
  if (input.invoiceId !== undefined && input.invoiceId !== "") filters.invoiceId = input.invoiceId;
  if (input.eventId !== undefined && input.eventId !== "") filters.eventId = input.eventId;
  if (input.eventType !== undefined && input.eventType !== "") filters.eventType = input.eventType;
  if (input.outcome !== undefined && input.outcome !== "") {
    const outcomes = input.outcome.split(",").map((o) => o.trim());
    for (const o of outcomes) {
      if (!(DELIVERY_OUTCOMES as readonly string[]).includes(o)) {
        throw new AppError("invalid_request", `outcome "${o}" is not one of ${DELIVERY_OUTCOMES.join(", ")}`, { param: "outcome" });
      }
    }
    filters.outcomes = [...new Set(outcomes)] as DeliveryOutcome[];
  }
  for (const bound of ["since", "until"] as const) {
    const text = input[bound];
    if (text === undefined || text === "") continue;
    const at = parseTimeBound(text, now, bound);
    if (at === null) throw new AppError("invalid_request", `${bound} must be an ISO 8601 date-time (or date), or a duration like 30m, 1h, 7d`, { param: bound });
    filters[bound] = at;
  }
  if (filters.since !== undefined && filters.until !== undefined && filters.since > filters.until) {
    throw new AppError("invalid_request", "since is after until", { param: "since" });
  }
  return filters;
}
