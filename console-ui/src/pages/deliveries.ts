// The delivery log of a store: filters (outcome, plugin, invoice, time) kept in the address, pages of 50
// newest first, and a live view that adds new deliveries at the top as they arrive (Server-Sent Events
// from /console/api/stores/:storeId/deliveries/stream, on the same filters).
import { adminPath, ApiError } from "../lib/api.ts";
import { fmtTime, h, replace } from "../lib/dom.ts";
import { appLink, errorText, fmtMs, notFound, outcomeBadge } from "../lib/log-views.ts";
import type { PageContext } from "../lib/page.ts";
import { pagedList } from "../lib/paged-list.ts";

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
  createdAt: string;
}

export const OUTCOMES = [
  "applied",
  "already_applied",
  "ignored",
  "rejected",
  "plugin_error",
  "plugin_timeout",
  "plugin_busy",
  "invalid_transition",
  "invoice_not_found",
  "plugin_not_found",
  "duplicate_event",
  "secrets_unavailable",
];

const FILTERS = ["outcome", "pluginName", "invoiceId", "since", "until"] as const;
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

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const { storeId } = ctx;
  const base = `/console/stores/${encodeURIComponent(storeId)}/deliveries`;
  let filters = filtersFromLocation();
  let stream: EventSource | null = null;

  const tbody = h("tbody");
  const status = h("p", { class: "muted", "data-testid": "list-status" });
  const liveState = h("span", { class: "live-state muted", "data-testid": "live-state" });

  const row = (d: DeliverySummary, fresh = false) =>
    h(
      "tr",
      { "data-delivery-id": d.id, class: fresh ? "fresh" : null },
      h("td", null, h("time", { datetime: d.createdAt }, fmtTime(d.createdAt))),
      h("td", null, d.pluginName, d.pluginVersion === null ? null : h("span", { class: "muted" }, ` v${d.pluginVersion}`)),
      h("td", null, outcomeBadge(d.outcome), d.replayOf === null ? null : h("span", { class: "muted" }, " replay")),
      h("td", null, d.invoiceId === null ? "—" : appLink(`${base}${query({ invoiceId: d.invoiceId })}`, d.invoiceId, ctx.navigate, { class: "mono" })),
      h("td", null, d.transition ?? "—"),
      h("td", { class: "num" }, String(d.responseStatus)),
      h("td", { class: "num" }, fmtMs(d.durationMs)),
      h("td", null, appLink(`${base}/${encodeURIComponent(d.id)}`, d.id, ctx.navigate, { class: "mono" })),
    );

  const list = pagedList<DeliverySummary>({
    body: tbody,
    status,
    moreLabel: "Older deliveries",
    path: (cursor) => adminPath(storeId, "deliveries") + query(filters, { limit: "50", ...(cursor ? { cursor } : {}) }),
    row: (d) => row(d),
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
  const { more } = list;
  const load = (fresh: boolean) => list.load(fresh);

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
      tbody.prepend(row(d, true));
      status.textContent = "";
    });
  }

  function stopLive(): void {
    stream?.close();
    stream = null;
    liveState.textContent = "";
  }

  const input = (name: keyof Filters, label: string, placeholder: string) =>
    h("label", null, label, h("input", { name, type: "text", placeholder, value: filters[name] ?? "", autocomplete: "off", spellcheck: "false" }));

  const outcomeSelect = h(
    "select",
    { name: "outcome" },
    h("option", { value: "" }, "any"),
    h("option", { value: "plugin_error,plugin_timeout" }, "failed runs"),
    OUTCOMES.map((o) => h("option", { value: o }, o)),
  );
  outcomeSelect.value = filters.outcome ?? "";
  if (outcomeSelect.value !== (filters.outcome ?? "")) outcomeSelect.append(h("option", { value: filters.outcome ?? "", selected: true }, filters.outcome ?? ""));

  const liveToggle = h("input", {
    type: "checkbox",
    name: "live",
    "data-testid": "live-toggle",
    on: { change: (e: Event) => ((e.target as HTMLInputElement).checked ? startLive() : stopLive()) },
  });

  const form = h(
    "form",
    {
      class: "filters",
      on: {
        submit: (e: Event) => {
          e.preventDefault();
          const data = new FormData(form);
          filters = {};
          for (const k of FILTERS) {
            const v = String(data.get(k) ?? "").trim();
            if (v !== "") filters[k] = v;
          }
          history.replaceState(null, "", base + query(filters));
          void load(true);
          if (liveToggle.checked) startLive();
        },
      },
    },
    h("label", null, "Outcome", outcomeSelect),
    input("pluginName", "Plugin", "stripe"),
    input("invoiceId", "Invoice", "invoice id"),
    input("since", "Since", "1h or 2024-06-01"),
    input("until", "Until", "2024-06-30T12:00:00Z"),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: base, class: "button secondary", on: { click: (e: Event) => { e.preventDefault(); ctx.navigate(base); } } }, "Clear"),
  );

  replace(
    root,
    h("header", { class: "page-head" }, h("h1", null, "Deliveries"), h("label", { class: "toggle" }, liveToggle, " Live", " ", liveState)),
    form,
    h(
      "table",
      { class: "log", "data-testid": "deliveries" },
      h("thead", null, h("tr", null, ["Received", "Plugin", "Outcome", "Invoice", "Transition", "Status", "Time", "Delivery"].map((t) => h("th", null, t)))),
      tbody,
    ),
    status,
    more,
  );
  void load(true);

  return () => {
    list.stop();
    stopLive();
  };
}
