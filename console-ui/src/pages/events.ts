// Events out: the store's events newest first (by type and invoice), each with its JSON as text and the
// attempts made to send it to every endpoint (with the receiver's answer), and re-send (to one endpoint or
// all). The endpoints themselves are managed on their own page (endpoints.ts).
import { adminPath, api, ApiError } from "../lib/api.ts";
import { type Attempt, attemptsTable } from "../lib/attempts.ts";
import { copyButton } from "../lib/copy.ts";
import { h, replace } from "../lib/dom.ts";
import { appLink, errorText, notFound, pre, pretty } from "../lib/log-views.ts";
import { timeEl } from "../lib/time.ts";
import type { PageContext } from "../lib/page.ts";
import { type Paged, pagedList } from "../lib/paged-list.ts";

interface EventBody {
  id: string;
  type: string;
  createdAt: string;
  data: { invoice?: { id?: string }; delivery?: { id?: string } } & Record<string, unknown>;
}

interface Endpoint {
  id: string;
  url: string;
  description: string;
  types: string[];
  enabled: boolean;
  disabledReason: string | null;
  apiVersion: string;
}

export const EVENT_TYPES = ["invoice.created", "invoice.completed", "invoice.disputed", "invoice.expired", "invoice.cancelled", "invoice.refunded", "delivery.failed"];

/** What the page's parts share: whether it is still open, the endpoints (an event's attempts are listed per endpoint), its timers. */
interface EventsPage {
  root: HTMLElement;
  ctx: PageContext;
  live: boolean;
  endpoints: Endpoint[];
  timers: Set<ReturnType<typeof setTimeout>>;
}

interface Filters {
  types: string;
  invoiceId: string;
}

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const page: EventsPage = { root, ctx, live: true, endpoints: [], timers: new Set() };
  let filters: Filters = { types: "", invoiceId: new URLSearchParams(location.search).get("invoiceId") ?? "" };

  const eventsBody = h("tbody");
  const eventsStatus = h("p", { class: "muted" });
  const eventsList = pagedList<EventBody>({
    body: eventsBody,
    status: eventsStatus,
    moreLabel: "Older events",
    path: (cursor) => eventsPath(ctx.storeId, filters, cursor),
    row: (ev) => eventRow(page, ev),
    empty: "No events match.",
    onError: (err) => fail(page, err, eventsStatus),
  });
  const loadEvents = (fresh: boolean) => eventsList.load(fresh);
  const form = filterForm(filters, (chosen) => {
    filters = chosen;
    void loadEvents(true);
  });

  replace(root, pageHead(ctx), form, eventsTable(eventsBody), eventsStatus, eventsList.more);
  // Endpoints first: an event's detail lists its attempts per endpoint.
  void loadEndpoints(page)
    .catch((err: unknown) => fail(page, err, eventsStatus))
    .then(() => loadEvents(true));

  return () => {
    page.live = false;
    eventsList.stop();
    for (const t of page.timers) clearTimeout(t);
  };
}

/** Runs `fn` after `ms` unless the page has been left meanwhile. */
function later(page: EventsPage, fn: () => void, ms: number): void {
  const t = setTimeout(() => {
    page.timers.delete(t);
    if (page.live) fn();
  }, ms);
  page.timers.add(t);
}

/** An unknown store replaces the whole page; any other error is shown where the work was for. */
function fail(page: EventsPage, err: unknown, into: HTMLElement): void {
  if (err instanceof ApiError && err.status === 404 && err.code === "store_not_found") {
    page.live = false;
    replace(page.root, notFound("Store"));
    return;
  }
  replace(into, h("p", { class: "error" }, errorText(err)));
}

async function loadEndpoints(page: EventsPage): Promise<void> {
  page.endpoints = (await api<{ data: Endpoint[] }>("GET", adminPath(page.ctx.storeId, "endpoints"))).data;
}

function eventsPath(storeId: string, filters: Filters, cursor: string | null | undefined): string {
  const q = new URLSearchParams({ limit: "50" });
  if (filters.types) q.set("types", filters.types);
  if (filters.invoiceId) q.set("invoiceId", filters.invoiceId);
  if (cursor) q.set("cursor", cursor);
  return adminPath(storeId, "events") + `?${q.toString()}`;
}

function pageHead(ctx: PageContext): HTMLElement {
  return h("header", { class: "page-head" }, h("h1", null, "Events"), appLink(`/console/stores/${encodeURIComponent(ctx.storeId)}/endpoints`, "Manage endpoints", ctx.navigate));
}

/** Type and invoice filters; submitting them lists the events again from the newest. */
function filterForm(initial: Filters, onFilter: (filters: Filters) => void): HTMLElement {
  const typeSelect = h("select", { name: "types", id: "events-type" }, h("option", { value: "" }, "any"), EVENT_TYPES.map((t) => h("option", { value: t }, t)));
  const invoiceInput = h("input", { name: "invoiceId", id: "events-invoice", type: "text", placeholder: "invoice id", value: initial.invoiceId, autocomplete: "off", spellcheck: "false" });
  return h(
    "form",
    {
      class: "filters",
      on: {
        submit: (e: Event) => {
          e.preventDefault();
          onFilter({ types: typeSelect.value, invoiceId: invoiceInput.value.trim() });
        },
      },
    },
    h("label", { for: "events-type" }, "Type", typeSelect),
    h("label", { for: "events-invoice" }, "Invoice", invoiceInput),
    h("button", { type: "submit" }, "Filter"),
  );
}

function eventsTable(body: HTMLElement): HTMLElement {
  return h(
    "div",
    { class: "scroll-x", tabindex: "0", role: "region", "aria-label": "Events" },
    h("table", { class: "log", "data-testid": "events" }, h("thead", null, h("tr", null, ["Created", "Type", "About", "Event", "Details"].map((t) => h("th", { scope: "col" }, t)))), body),
  );
}

/** An event's row, and the hidden row below it that opens on its detail. */
function eventRow(page: EventsPage, ev: EventBody): HTMLElement[] {
  const detailRow = h("tr", { class: "detail", hidden: true }, h("td", { colspan: "5" }));
  return [
    h(
      "tr",
      { "data-event-id": ev.id },
      h("td", null, timeEl(ev.createdAt)),
      h("td", null, ev.type),
      h("td", null, aboutLink(page.ctx, ev)),
      h("td", { class: "mono" }, ev.id, " ", copyButton(`event id ${ev.id}`, () => ev.id)),
      h("td", null, detailToggle(page, ev, detailRow)),
    ),
    detailRow,
  ];
}

/** What the event is about: its invoice's deliveries, or the delivery that failed. */
function aboutLink(ctx: PageContext, ev: EventBody): HTMLElement | string {
  const invoiceId = typeof ev.data.invoice?.id === "string" ? ev.data.invoice.id : null;
  const deliveryId = typeof ev.data.delivery?.id === "string" ? ev.data.delivery.id : null;
  const base = `/console/stores/${encodeURIComponent(ctx.storeId)}`;
  if (invoiceId !== null) return appLink(`${base}/deliveries?invoiceId=${encodeURIComponent(invoiceId)}`, invoiceId, ctx.navigate, { class: "mono", title: "Deliveries about this invoice" });
  if (deliveryId !== null) return appLink(`${base}/deliveries/${encodeURIComponent(deliveryId)}`, deliveryId, ctx.navigate, { class: "mono" });
  return "—";
}

/** Show/Hide: the detail is built afresh each time it opens (its attempts loaded again). */
function detailToggle(page: EventsPage, ev: EventBody, detailRow: HTMLTableRowElement): HTMLButtonElement {
  const toggle = h("button", {
    type: "button",
    class: "secondary",
    "data-testid": "show-event",
    "aria-label": `Show event ${ev.id}`,
    "aria-expanded": "false",
    on: {
      click: () => {
        if (detailRow.hidden) {
          replace(detailRow.firstElementChild!, eventDetail(page, ev));
          detailRow.hidden = false;
          toggle.textContent = "Hide";
          toggle.setAttribute("aria-label", `Hide event ${ev.id}`);
          toggle.setAttribute("aria-expanded", "true");
        } else {
          detailRow.hidden = true;
          toggle.textContent = "Show";
          toggle.setAttribute("aria-label", `Show event ${ev.id}`);
          toggle.setAttribute("aria-expanded", "false");
        }
      },
    },
  }, "Show");
  return toggle;
}

/** One event's JSON, re-send, and the attempts made to send it. */
function eventDetail(page: EventsPage, ev: EventBody): HTMLElement {
  const attemptsBox = h("div", { class: "event-attempts", "data-testid": "event-attempts" }, h("p", { class: "muted" }, "Loading attempts…"));
  const refresh = () => eventAttempts(page, ev, attemptsBox).catch((err: unknown) => fail(page, err, attemptsBox));
  const resend = resendPanel(page, ev, refresh);
  void refresh();
  return h(
    "div",
    { class: "event-detail", "data-testid": "event-detail" },
    pre(pretty(ev), "code event-json"),
    copyButton(`event ${ev.id} as JSON`, () => pretty(ev)),
    resend,
    h("h3", null, "Attempts"),
    attemptsBox,
  );
}

/** The attempts per endpoint, in `into`; returns how many there are. */
async function eventAttempts(page: EventsPage, ev: EventBody, into: HTMLElement): Promise<number> {
  const lists = await Promise.all(
    page.endpoints.map(async (ep) => ({ ep, attempts: (await api<Paged<Attempt>>("GET", adminPath(page.ctx.storeId, "endpoints", ep.id, "attempts") + `?eventId=${encodeURIComponent(ev.id)}&limit=100`)).data })),
  );
  if (!page.live) return 0;
  replace(
    into,
    lists.length === 0
      ? h("p", { class: "muted" }, "No endpoints: nothing was sent.")
      : lists.map(({ ep, attempts }) =>
          h(
            "div",
            { class: "event-endpoint", "data-endpoint-id": ep.id },
            h("h4", null, h("span", { class: "mono" }, ep.url)),
            attempts.length === 0 ? h("p", { class: "muted" }, "No attempts.") : attemptsTable(attempts, false),
          ),
        ),
  );
  return lists.reduce((n, l) => n + l.attempts.length, 0);
}

/** Re-send to one endpoint or every subscribed one, then look again until the new attempts show. */
function resendPanel(page: EventsPage, ev: EventBody, refresh: () => Promise<number | void>): HTMLElement {
  const resendOut = h("span", { class: "muted", "data-testid": "resend-result", "aria-live": "polite" });
  const target = h("select", { name: "endpoint", "aria-label": `Re-send ${ev.id} to` }, h("option", { value: "" }, "every subscribed endpoint"), page.endpoints.map((ep) => h("option", { value: ep.id }, ep.url)));
  const resendClicked = () => {
    resend.disabled = true;
    resendOut.textContent = "Sending…";
    const body = target.value === "" ? {} : { endpointId: target.value };
    api<{ deliveries: { id: string; endpointId: string }[] }>("POST", adminPath(page.ctx.storeId, "events", ev.id, "resend"), body)
      .then(async (r) => {
        resendOut.textContent = r.deliveries.length === 0 ? "No enabled endpoint wants this event." : `Queued to ${r.deliveries.length} endpoint${r.deliveries.length === 1 ? "" : "s"}.`;
        // The dispatcher sends within a few seconds: look again until the new attempts show.
        const before = await refresh();
        let tries = 0;
        const poll = () => {
          void refresh().then((n) => {
            if (typeof n === "number" && n < (before ?? 0) + r.deliveries.length && ++tries < 20) later(page, poll, 1_000);
          });
        };
        if (r.deliveries.length > 0) later(page, poll, 500);
      })
      .catch((err: unknown) => (resendOut.textContent = errorText(err)))
      .finally(() => (resend.disabled = false));
  };
  const resend = h("button", { type: "button", "data-testid": "resend", "aria-label": `Re-send ${ev.id}`, on: { click: resendClicked } }, "Re-send");
  return h("div", { class: "resend" }, "Re-send to ", target, " ", resend, " ", resendOut);
}
