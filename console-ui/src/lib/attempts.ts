// Outbound webhook attempts as a table: when, outcome, the receiver's status, why no answer came, time,
// next retry, and on demand the receiver's response headers and body (a failed attempt's 500 body too).
import { h } from "./dom.ts";
import { fmtMs, outcomeBadge } from "./log-views.ts";
import { timeEl } from "./time.ts";

export interface Attempt {
  id: string;
  eventId: string;
  endpointId: string;
  attempt: number;
  outcome: string;
  responseStatus: number | null;
  error: string | null;
  responseExcerpt: string;
  responseHeaders: Record<string, string>;
  durationMs: number;
  createdAt: string;
  nextAttemptAt: string | null;
}

/** The receiver's answer as text: its headers, a blank line, the start of its body. */
export function answerText(status: number | null, headers: Record<string, string>, body: string): string {
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join("\n");
  return `${status === null ? "no answer" : `HTTP ${status}`}\n${head}\n\n${body}`;
}

export function attemptsTable(attempts: Attempt[], withEvent: boolean): HTMLTableElement {
  const cols = ["At", ...(withEvent ? ["Event"] : []), "Attempt", "Outcome", "Status", "Error", "Time", "Next retry", "Answer"];
  const rows = attempts.map((a) => {
    const answer = h("details", { class: "answer" }, h("summary", { "aria-label": `Answer to attempt ${a.attempt} of ${a.eventId}` }, a.responseStatus === null ? "none" : "show"), h("pre", { tabindex: "0", "data-testid": "attempt-answer" }, answerText(a.responseStatus, a.responseHeaders, a.responseExcerpt)));
    return h(
      "tr",
      { "data-attempt-id": a.id },
      h("td", null, timeEl(a.createdAt)),
      withEvent ? h("td", { class: "mono" }, a.eventId) : null,
      h("td", null, `#${a.attempt}`),
      h("td", null, outcomeBadge(a.outcome)),
      h("td", { class: "num" }, a.responseStatus === null ? "—" : String(a.responseStatus)),
      h("td", { class: "wrap" }, a.error ?? ""),
      h("td", { class: "num" }, fmtMs(a.durationMs)),
      h("td", null, a.nextAttemptAt === null ? "—" : timeEl(a.nextAttemptAt)),
      h("td", null, answer),
    );
  });
  return h("table", { class: "log" }, h("thead", null, h("tr", null, cols.map((c) => h("th", { scope: "col" }, c)))), h("tbody", null, rows));
}
