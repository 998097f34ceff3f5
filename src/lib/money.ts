// Money is stored as integer cents and shown as a JSON number of US dollars with at most two decimals.
export const centsToUsd = (cents: number): number => cents / 100;

/** Dollars from the admin API to cents; refuses more than two decimals instead of rounding silently. */
export function usdToCents(usd: number): number | null {
  const cents = Math.round(usd * 100);
  return Math.abs(cents - usd * 100) < 1e-6 && Number.isSafeInteger(cents) ? cents : null;
}
