// The delivery log of a store: filters (outcome, plugin, provider event type and id, invoice, time) kept in
// the address, a total count, jump to a time, pages of 50 newest first, outcomes that need attention marked,
// and a live view that adds new deliveries at the top as they arrive (Server-Sent Events from
// /console/api/stores/:storeId/deliveries/stream, on the same filters).
import { adminPath, api, ApiError } from "../lib/api.ts";
import { h, replace } from "../lib/dom.ts";
import { appLink, errorText, fmtMs, notFound, outcomeBadge } from "../lib/log-views.ts";
import type { PageContext } from "../lib/page.ts";
import { pagedList } from "../lib/paged-list.ts";
import { timeEl } from "../lib/time.ts";

export interface DeliverySummary {
  id: string;
  pluginName: string;
  pluginVersion: number | null;
  replayOf: string | null;
  outcome: string;
  invoiceId: string | null;
  transition: string | null;
  responseStatus: number;
  durationMs: number;
  eventId: string | null;
  eventType: string | null;
  warnings: number;
  createdAt: string;
}

export const OUTCOMES = ["applied", "already_applied", "ignored", "rejected", "plugin_error", "plugin_timeout", "plugin_busy", "invalid_transition", "invoice_not_found", "plugin_not_found", "duplicate_event", "secrets_unavailable"];

/** Outcomes a merchant must look at: money that did not move as it should, or a broken plugin. */
const ATTENTION = new Set(["plugin_error", "plugin_timeout", "invalid_transition", "invoice_not_found", "secrets_unavailable"]);
export const needsAttention = (d: Pick<DeliverySummary, "outcome" | "warnings">) => ATTENTION.has(d.outcome) || d.warnings > 0;

const FILTERS = ["outcome", "pluginName", "eventType", "eventId", "invoiceId", "since", "until"] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

function filtersFromLocation(): Filters {
  const q = new URLSearchParams(location.search);
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = q.get(k);
    if (v !== null && v !== "") f[k] = v;
  }
  return f;
}

function query(f: Filters, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (f[k]) q.set(k, f[k]);
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

function deliveryRow(d: DeliverySummary, base: string, navigate: (p: string) => void, fresh = false): HTMLTableRowElement {
  const attention = needsAttention(d);
  return h(
    "tr",
    { "data-delivery-id": d.id, class: [fresh ? "fresh" : "", attention ? "attention" : ""].join(" ").trim() || null },
    h("td", null, timeEl(d.createdAt)),
    h("td", null, d.pluginName, d.pluginVersion === null ? null : h("span", { class: "muted" }, ` v${d.pluginVersion}`)),
    h("td", { class: "mono wrap" }, d.eventType ? appLink(`${base}${query({ eventType: d.eventType })}`, d.eventType, navigate) : "—"),
    h("td", { class: "mono wrap" }, d.eventId ? appLink(`${base}${query({ eventId: d.eventId })}`, d.eventId, navigate) : "—"),
    h(
      "td",
      null,
      outcomeBadge(d.outcome),
      attention ? h("span", { class: "badge bad", title: d.warnings > 0 ? `${d.warnings} warning or error line(s) in the plugin's log` : "needs attention" }, "needs attention") : null,
      d.replayOf === null ? null : [" replay of ", appLink(`${base}/${encodeURIComponent(d.replayOf)}`, d.replayOf, navigate, { class: "mono" })],
    ),
    h("td", null, d.invoiceId === null ? "—" : appLink(`${base}${query({ invoiceId: d.invoiceId })}`, d.invoiceId, navigate, { class: "mono" })),
    h("td", null, d.transition ?? "—"),
    h("td", { class: "num" }, String(d.responseStatus)),
    h("td", { class: "num" }, fmtMs(d.durationMs)),
    h("td", null, appLink(`${base}/${encodeURIComponent(d.id)}`, d.id, navigate, { class: "mono" })),
  );
}

function filterForm(filters: Filters, base: string, ctx: PageContext, apply: (f: Filters) => void): HTMLFormElement {
  const input = (name: keyof Filters, label: string, placeholder: string) =>
    h("label", { for: `filter-${name}` }, label, h("input", { name, id: `filter-${name}`, type: "text", placeholder, value: filters[name] ?? "", autocomplete: "off", spellcheck: "false" }));
  const outcome = h("select", { name: "outcome", id: "filter-outcome" }, h("option", { value: "" }, "any"), h("option", { value: "plugin_error,plugin_timeout" }, "failed runs"), OUTCOMES.map((o) => h("option", { value: o }, o)));
  outcome.value = filters.outcome ?? "";
  if (outcome.value !== (filters.outcome ?? "")) outcome.append(h("option", { value: filters.outcome ?? "", selected: true }, filters.outcome ?? ""));
  const form = h(
    "form",
    {
      class: "filters",
      "aria-label": "Filter deliveries",
      on: {
        submit: (e: Event) => {
          e.preventDefault();
          const data = new FormData(form);
          const f: Filters = {};
          for (const k of FILTERS) {
            const v = String(data.get(k) ?? "").trim();
            if (v !== "") f[k] = v;
          }
          apply(f);
        },
      },
    },
    h("label", { for: "filter-outcome" }, "Outcome", outcome),
    input("pluginName", "Plugin", "stripe"),
    input("eventType", "Event type", "charge.dispute.created"),
    input("eventId", "Event id", "evt_…"),
    input("invoiceId", "Invoice", "invoice id"),
    input("since", "Since", "1h or 2024-06-01"),
    input("until", "Until", "2024-06-30T12:00:00Z"),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: base, class: "button secondary", on: { click: (e: Event) => (e.preventDefault(), ctx.navigate(base)) } }, "Clear"),
  );
  return form;
}

/** "Jump to" a moment: the list continues from there, older first page. */
function jumpForm(apply: (untilIso: string) => void): HTMLFormElement {
  const at = h("input", { type: "datetime-local", name: "jump", id: "jump-at", step: "1", "data-testid": "jump-at" });
  return h(
    "form",
    { class: "filters jump", "aria-label": "Jump to a time", on: { submit: (e: Event) => (e.preventDefault(), at.value !== "" && apply(new Date(at.value).toISOString())) } },
    h("label", { for: "jump-at" }, "Jump to (your local time)", at),
    h("button", { type: "submit", class: "secondary", "data-testid": "jump" }, "Jump"),
  );
}

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const { storeId } = ctx;
  const base = `/console/stores/${encodeURIComponent(storeId)}/deliveries`;
  let filters = filtersFromLocation();
  let stream: EventSource | null = null;
  const tbody = h("tbody");
  const status = h("p", { class: "muted", "data-testid": "list-status" });
  const total = h("p", { class: "muted", "data-testid": "total", "aria-live": "polite" });
  const liveState = h("span", { class: "live-state muted", "data-testid": "live-state" });

  const list = pagedList<DeliverySummary>({
    body: tbody,
    status,
    moreLabel: "Older deliveries",
    path: (cursor) => adminPath(storeId, "deliveries") + query(filters, { limit: "50", ...(cursor ? { cursor } : {}) }),
    row: (d) => deliveryRow(d, base, ctx.navigate),
    empty: "No deliveries match.",
    onError: (err) => {
      if (err instanceof ApiError && err.status === 404) {
        stopLive();
        replace(root, notFound("Store"));
        return;
      }
      status.textContent = errorText(err);
    },
  });
  const countTotal = () =>
    void api<{ pagination: { total?: number; totalCapped?: boolean } }>("GET", adminPath(storeId, "deliveries") + query(filters, { limit: "1", total: "true" }))
      .then((r) => (total.textContent = `${r.pagination.totalCapped ? "More than " : ""}${r.pagination.total ?? 0} deliver${r.pagination.total === 1 ? "y" : "ies"} match`))
      .catch(() => (total.textContent = ""));

  function startLive(): void {
    stopLive();
    const q = query({ ...(filters.outcome ? { outcome: filters.outcome } : {}), ...(filters.pluginName ? { pluginName: filters.pluginName } : {}), ...(filters.invoiceId ? { invoiceId: filters.invoiceId } : {}) });
    stream = new EventSource(`/console/api/stores/${encodeURIComponent(storeId)}/deliveries/stream${q}`);
    liveState.textContent = "connecting…";
    stream.addEventListener("open", () => (liveState.textContent = "live"));
    stream.addEventListener("error", () => {
      // CLOSED: refused (the session ended, or the store is gone), and the browser will not try again.
      liveState.textContent = stream?.readyState === EventSource.CLOSED ? "stopped: reload the page (or sign in again)" : "reconnecting…";
    });
    stream.addEventListener("delivery", (event) => {
      const d = JSON.parse((event as MessageEvent<string>).data) as DeliverySummary;
      if (tbody.querySelector(`tr[data-delivery-id="${CSS.escape(d.id)}"]`)) return;
      tbody.prepend(deliveryRow(d, base, ctx.navigate, true));
      status.textContent = "";
    });
  }
  function stopLive(): void {
    stream?.close();
    stream = null;
    liveState.textContent = "";
  }
  const liveToggle = h("input", { type: "checkbox", name: "live", "data-testid": "live-toggle", on: { change: (e: Event) => ((e.target as HTMLInputElement).checked ? startLive() : stopLive()) } });

  const apply = (f: Filters) => {
    filters = f;
    history.replaceState(null, "", base + query(filters));
    void list.load(true);
    countTotal();
    if (liveToggle.checked) startLive();
  };
  const headers = ["Received", "Plugin", "Event type", "Event id", "Outcome", "Invoice", "Transition", "Status", "Time", "Delivery"];
  replace(
    root,
    h("header", { class: "page-head" }, h("h1", null, "Deliveries"), h("label", { class: "toggle" }, liveToggle, " Live", " ", liveState)),
    filterForm(filters, base, ctx, apply),
    jumpForm((until) => apply({ ...filters, until })),
    total,
    h("div", { class: "scroll-x", tabindex: "0", role: "region", "aria-label": "Deliveries" }, h("table", { class: "log", "data-testid": "deliveries" }, h("thead", null, h("tr", null, headers.map((t) => h("th", { scope: "col" }, t)))), tbody)),
    status,
    list.more,
  );
  void list.load(true);
  countTotal();
  return () => {
    list.stop();
    stopLive();
  };
}
