// Timestamps as merchants read them: local time with its time zone, how long ago, and the exact ISO time on
// hover (and in the datetime attribute).

const RELATIVE = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
const STEPS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["second", 60],
  ["minute", 60],
  ["hour", 24],
  ["day", 30],
  ["month", 12],
  ["year", Infinity],
];

export function relative(ms: number, now = Date.now()): string {
  let value = (ms - now) / 1000;
  for (const [unit, size] of STEPS) {
    if (Math.abs(value) < size) return RELATIVE.format(Math.round(value), unit);
    value /= size;
  }
  return "";
}

export function localTime(iso: string): string {
  // Components, not dateStyle/timeStyle: those cannot be combined with timeZoneName.
  return new Date(iso).toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
}

/** <time> with the local time and zone, "(5 minutes ago)", and the ISO time as its title. */
export function timeEl(iso: string | null | undefined): HTMLElement {
  const el = document.createElement("time");
  if (!iso) {
    el.textContent = "—";
    return el;
  }
  el.dateTime = iso;
  el.title = iso;
  el.textContent = `${localTime(iso)} (${relative(Date.parse(iso))})`;
  return el;
}
