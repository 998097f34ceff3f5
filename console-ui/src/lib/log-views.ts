// Small views shared by the deliveries and events pages: tables, key/value lists, in-app links, outcome
// badges, and the text, hex and base64 views of a body. Everything goes through h(), so what came from
// outside is only ever text.
import "./log-views.css";
import { ApiError } from "./api.ts";
import { h, type Child } from "./dom.ts";

export function table(headers: string[], rows: Child[][], className = "log"): HTMLTableElement {
  return h(
    "table",
    { class: className },
    h("thead", null, h("tr", null, headers.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", null, rows.map((cells) => h("tr", null, cells.map((c) => h("td", null, c))))),
  );
}

export function keyValues(pairs: [string, Child][]): HTMLDListElement {
  return h("dl", { class: "kv" }, pairs.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}

/** A link inside the console: a plain click navigates without reloading, a modified one opens as usual. */
export function appLink(href: string, text: Child, navigate: (path: string) => void, attrs: Record<string, string> = {}): HTMLAnchorElement {
  return h("a", {
    ...attrs,
    href,
    on: {
      click: (event: Event) => {
        const e = event as MouseEvent;
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      },
    },
  }, text);
}

const GOOD = new Set(["applied", "already_applied", "duplicate_event", "succeeded", "ignored"]);
const BAD = new Set(["plugin_error", "plugin_timeout", "invalid_transition", "invoice_not_found", "plugin_not_found", "secrets_unavailable", "exhausted", "gone"]);

export function outcomeBadge(outcome: string): HTMLSpanElement {
  const tone = GOOD.has(outcome) ? "ok" : BAD.has(outcome) ? "bad" : "warn";
  return h("span", { class: `badge ${tone}` }, outcome);
}

export function pretty(value: unknown): string {
  if (value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** Scrollable, so focusable: a keyboard reader can scroll it too. */
export function pre(text: string, className = "code"): HTMLPreElement {
  return h("pre", { class: className, tabindex: "0" }, text);
}

export function base64ToBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** The classic 16-bytes-a-line dump: offset, hex, and the printable ASCII (dots for the rest). */
export function hexDump(bytes: Uint8Array, maxBytes = 64 * 1024): string {
  const lines: string[] = [];
  const n = Math.min(bytes.length, maxBytes);
  for (let off = 0; off < n; off += 16) {
    const chunk = bytes.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  |${ascii}|`);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes (see the base64 view)`);
  return lines.join("\n");
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.code}, HTTP ${err.status})`;
  return err instanceof Error ? err.message : String(err);
}

export function notFound(what: string): HTMLElement {
  return h("section", { class: "not-found", "data-testid": "not-found" }, h("h1", null, `${what} not found`), h("p", { class: "muted" }, "It does not exist, or this login may not see it."));
}

export const fmtMs = (ms: number | null | undefined) => (ms === null || ms === undefined ? "—" : `${ms < 10 ? ms.toFixed(2) : Math.round(ms)} ms`);
