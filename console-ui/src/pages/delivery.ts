// One delivery: what arrived (method, query, headers, the body as text, hex or base64), what the plugin
// did (result or error with its line, logs, fetches), the transition it made, the answer sent, and
// Replay through the plugin's current version. Bodies, headers and logs are strangers' data: text only.
import { adminPath, api, ApiError } from "../lib/api.ts";
import { copyButton, copyable } from "../lib/copy.ts";
import { h, replace } from "../lib/dom.ts";
import { timeEl } from "../lib/time.ts";
import { appLink, base64ToBytes, bytesToBase64, errorText, fmtMs, hexDump, keyValues, notFound, outcomeBadge, pre, pretty, table } from "../lib/log-views.ts";
import type { PageContext } from "../lib/page.ts";
import { type DeliverySummary, needsAttention } from "./deliveries.ts";

interface DeliveryView extends DeliverySummary {
  request: { method: string; headers: Record<string, string>; query: Record<string, string>; body: string; bodyBase64: string | null };
  result: unknown;
  error: { kind?: string; message?: string; line?: number } | null;
  logs: { description: string; type: string; at: string }[];
  fetches: { url: string; method: string; status: number | null; error: string | null; durationMs: number }[];
  response: unknown;
}

interface ReplayAnswer {
  deliveryId: string | null;
  replayOf: string;
  status: number;
  response: unknown;
}

type BodyMode = "text" | "json" | "hex" | "base64";

function bodyView(request: DeliveryView["request"]): HTMLElement {
  const binary = request.bodyBase64 !== null;
  const bytes = binary ? base64ToBytes(request.bodyBase64!) : new TextEncoder().encode(request.body);
  let json: string | null = null;
  if (!binary) {
    try {
      json = JSON.stringify(JSON.parse(request.body), null, 2);
    } catch {
      json = null;
    }
  }
  // Pretty JSON first when the body is JSON: that is what a merchant reads.
  const modes: BodyMode[] = binary ? ["hex", "base64"] : json === null ? ["text", "hex", "base64"] : ["json", "text", "hex", "base64"];
  const labels: Record<BodyMode, string> = { text: "Text", json: "JSON", hex: "Hex", base64: "Base64" };
  const out = h("pre", { class: "code body", "data-testid": "body", tabindex: "0", "aria-label": "Request body" });
  const show = (mode: BodyMode) => {
    out.textContent = mode === "text" ? request.body : mode === "json" ? json! : mode === "hex" ? hexDump(bytes) : bytesToBase64(bytes);
    for (const b of tabs.querySelectorAll("button")) b.classList.toggle("active", b.dataset.mode === mode);
  };
  const tabs = h(
    "div",
    { class: "tabs", role: "group" },
    modes.map((m) => h("button", { type: "button", class: "tab", "data-mode": m, "aria-label": `Show the body as ${labels[m]}`, on: { click: () => show(m) } }, labels[m])),
  );
  show(modes[0]!);
  return h(
    "div",
    null,
    h("div", { class: "body-head" }, tabs, h("span", { class: "muted" }, `${bytes.length} bytes${binary ? ", not UTF-8" : ""}`), copyButton("body as received", () => (binary ? bytesToBase64(bytes) : request.body))),
    out,
  );
}

function headersTable(headers: Record<string, string>, testid: string): HTMLElement {
  const rows = Object.entries(headers);
  if (rows.length === 0) return h("p", { class: "muted" }, "none");
  const t = table(["Name", "Value", "Copy"], rows.map(([k, v]) => [h("span", { class: "mono" }, k), h("span", { class: "mono wrap" }, v), copyButton(`${testid === "query" ? "query parameter" : "header"} ${k}`, () => v)]));
  t.dataset.testid = testid;
  return t;
}

function render(root: HTMLElement, ctx: PageContext, d: DeliveryView): void {
  const base = `/console/stores/${encodeURIComponent(ctx.storeId)}/deliveries`;
  const replayOut = h("div", { class: "replay-result", "data-testid": "replay-result", "aria-live": "polite" });
  const replayButton = h("button", {
    type: "button",
    "data-testid": "replay",
    on: {
      click: () => {
        replayButton.disabled = true;
        replace(replayOut, "Replaying…");
        api<ReplayAnswer>("POST", adminPath(ctx.storeId, "deliveries", d.id, "replay"))
          .then(async (r) => {
            const after = r.deliveryId === null ? null : await api<DeliverySummary>("GET", adminPath(ctx.storeId, "deliveries", r.deliveryId));
            replace(
              replayOut,
              `Answered HTTP ${r.status}. `,
              after === null
                ? "Nothing was recorded."
                : ["Recorded as ", appLink(`${base}/${encodeURIComponent(after.id)}`, after.id, ctx.navigate, { class: "mono", "data-testid": "replay-link" }), ": ", outcomeBadge(after.outcome), after.transition ? ` ${after.transition}` : ""],
            );
          })
          .catch((err: unknown) => replace(replayOut, h("span", { class: "error" }, errorText(err))))
          .finally(() => (replayButton.disabled = false));
      },
    },
  }, "Replay");

  const error = d.error;
  replace(
    root,
    h("p", null, appLink(base, "← Deliveries", ctx.navigate)),
    h("header", { class: "page-head" }, h("h1", { class: "mono" }, d.id, " ", copyButton("delivery id", () => d.id)), replayButton),
    replayOut,
    h(
      "section",
      { class: "delivery", "data-testid": "delivery" },
      keyValues([
        ["Received", timeEl(d.createdAt)],
        ["Plugin", [d.pluginName, d.pluginVersion === null ? "" : ` (version ${d.pluginVersion})`]],
        ["Outcome", [outcomeBadge(d.outcome), needsAttention(d) ? h("span", { class: "badge bad" }, "needs attention") : null]],
        ["Event", d.eventType === null && d.eventId === null ? "—" : [d.eventType ?? "", " ", d.eventId === null ? "" : copyable("event id", d.eventId)]],
        ["Answered", `HTTP ${d.responseStatus} in ${fmtMs(d.durationMs)}`],
        ["Invoice", d.invoiceId === null ? "—" : appLink(`${base}?invoiceId=${encodeURIComponent(d.invoiceId)}`, d.invoiceId, ctx.navigate, { class: "mono" })],
        ["Transition", d.transition ?? "none"],
        ...(d.replayOf === null ? [] : ([["Replay of", appLink(`${base}/${encodeURIComponent(d.replayOf)}`, d.replayOf, ctx.navigate, { class: "mono" })]] as [string, HTMLElement][])),
      ]),

      h("h2", null, "Request"),
      keyValues([["Method", d.request.method], ["Query", Object.keys(d.request.query).length === 0 ? "none" : headersTable(d.request.query, "query")]]),
      h("h3", null, "Headers"),
      headersTable(d.request.headers, "headers"),
      h("h3", null, "Body"),
      bodyView(d.request),

      h("h2", null, "Result"),
      error === null
        ? h("div", null, pre(d.result === null ? "null" : pretty(d.result)), copyButton("result", () => pretty(d.result)))
        : h("div", { class: "error-box", "data-testid": "run-error" }, h("strong", null, error.kind ?? "error"), error.line === undefined ? null : ` on line ${error.line}`, ": ", error.message ?? ""),

      h("h2", null, "Logs"),
      d.logs.length === 0
        ? h("p", { class: "muted" }, "none")
        : table(["At", "Level", "Message"], d.logs.map((l) => [timeEl(l.at), h("span", { class: l.type === "info" ? "" : "badge warn" }, l.type), h("span", { class: "mono wrap" }, l.description)]), "log logs"),

      h("h2", null, "Fetches"),
      d.fetches.length === 0
        ? h("p", { class: "muted" }, "none")
        : table(["Method", "URL", "Status", "Error", "Time"], d.fetches.map((f) => [f.method, h("span", { class: "mono wrap" }, f.url), f.status === null ? "—" : String(f.status), f.error ?? "", fmtMs(f.durationMs)])),

      h("h2", null, "Answer sent"),
      pre(pretty(d.response)),
      copyButton("answer sent", () => pretty(d.response)),
    ),
  );
}

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  let live = true;
  const id = ctx.params.id ?? ctx.params.deliveryId ?? "";
  replace(root, h("p", { class: "muted" }, "Loading…"));
  api<DeliveryView>("GET", adminPath(ctx.storeId, "deliveries", id))
    .then((d) => {
      if (live) render(root, ctx, d);
    })
    .catch((err: unknown) => {
      if (!live) return;
      if (err instanceof ApiError && err.status === 404) replace(root, notFound("Delivery"));
      else replace(root, h("p", { class: "error" }, errorText(err)));
    });
  return () => {
    live = false;
  };
}
