// Reading /metrics in tests: Prometheus text exposition, one series at a time.

/** The value of one series in Prometheus text (its name and labels as written), or null when absent. */
export function sample(text: string, series: string): number | null {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}
