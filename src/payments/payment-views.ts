// The shapes the admin API and the command line both answer for simulation and replay (one shape per
// operation), with durations rounded to the microsecond the delivery log stores.
import type { SimulationResult, WebhookAnswer } from "./webhook.service.ts";

/** Milliseconds to three decimals: 9.096273999999994 -> 9.096. */
export const roundMs = (ms: number): number => Math.round(ms * 1000) / 1000;

export function simulationView(result: SimulationResult): SimulationResult {
  return { ...result, fetches: result.fetches.map((f) => ({ ...f, durationMs: roundMs(f.durationMs) })), durationMs: roundMs(result.durationMs) };
}

export interface ReplayView {
  deliveryId: string | null;
  replayOf: string;
  status: number;
  response: unknown;
}

export function replayView(answer: WebhookAnswer, replayOf: string): ReplayView {
  return { deliveryId: answer.deliveryId, replayOf, status: answer.status, response: answer.body };
}
