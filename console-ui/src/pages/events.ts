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

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const { storeId } = ctx;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  let live = true;
  let endpoints: Endpoint[] = [];
  let filters = { types: "", invoiceId: new URLSearchParams(location.search).get("invoiceId") ?? "" };

  const eventsBody = h("tbody");
  const eventsStatus = h("p", { class: "muted" });

  const later = (fn: () => void, ms: number) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (live) fn();
    }, ms);
    timers.add(t);
  };

  const fail = (err: unknown, into: HTMLElement) => {
    if (err instanceof ApiError && err.status === 404 && err.code === "store_not_found") {
      live = false;
      replace(root, notFound("Store"));
      return;
    }
    replace(into, h("p", { class: "error" }, errorText(err)));
  };

  async function loadEndpoints(): Promise<void> {
    endpoints = (await api<{ data: Endpoint[] }>("GET", adminPath(storeId, "endpoints"))).data;
  }

  // ---- events, one event's detail and re-send

  async function eventAttempts(ev: EventBody, into: HTMLElement): Promise<number> {
    const lists = await Promise.all(
      endpoints.map(async (ep) => ({ ep, attempts: (await api<Paged<Attempt>>("GET", adminPath(storeId, "endpoints", ep.id, "attempts") + `?eventId=${encodeURIComponent(ev.id)}&limit=100`)).data })),
    );
    if (!live) return 0;
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

  function eventDetail(ev: EventBody): HTMLElement {
    const attemptsBox = h("div", { class: "event-attempts", "data-testid": "event-attempts" }, h("p", { class: "muted" }, "Loading attempts…"));
    const resendOut = h("span", { class: "muted", "data-testid": "resend-result", "aria-live": "polite" });
    const target = h("select", { name: "endpoint", "aria-label": `Re-send ${ev.id} to` }, h("option", { value: "" }, "every subscribed endpoint"), endpoints.map((ep) => h("option", { value: ep.id }, ep.url)));
    const refresh = () => eventAttempts(ev, attemptsBox).catch((err: unknown) => fail(err, attemptsBox));

    const resend = h("button", {
      type: "button",
      "data-testid": "resend",
      "aria-label": `Re-send ${ev.id}`,
      on: {
        click: () => {
          resend.disabled = true;
          resendOut.textContent = "Sending…";
          const body = target.value === "" ? {} : { endpointId: target.value };
          api<{ deliveries: { id: string; endpointId: string }[] }>("POST", adminPath(storeId, "events", ev.id, "resend"), body)
            .then(async (r) => {
              resendOut.textContent = r.deliveries.length === 0 ? "No enabled endpoint wants this event." : `Queued to ${r.deliveries.length} endpoint${r.deliveries.length === 1 ? "" : "s"}.`;
              // The dispatcher sends within a few seconds: look again until the new attempts show.
              const before = await refresh();
              let tries = 0;
              const poll = () => {
                void refresh().then((n) => {
                  if (typeof n === "number" && n < (before ?? 0) + r.deliveries.length && ++tries < 20) later(poll, 1_000);
                });
              };
              if (r.deliveries.length > 0) later(poll, 500);
            })
            .catch((err: unknown) => (resendOut.textContent = errorText(err)))
            .finally(() => (resend.disabled = false));
        },
      },
    }, "Re-send");

    void refresh();
    return h(
      "div",
      { class: "event-detail", "data-testid": "event-detail" },
      pre(pretty(ev), "code event-json"),
      copyButton(`event ${ev.id} as JSON`, () => pretty(ev)),
      h("div", { class: "resend" }, "Re-send to ", target, " ", resend, " ", resendOut),
      h("h3", null, "Attempts"),
      attemptsBox,
    );
  }

  const eventRow = (ev: EventBody) => {
    const detailRow = h("tr", { class: "detail", hidden: true }, h("td", { colspan: "5" }));
    const toggle = h("button", {
      type: "button",
      class: "secondary",
      "data-testid": "show-event",
      "aria-label": `Show event ${ev.id}`,
      "aria-expanded": "false",
      on: {
        click: () => {
          if (detailRow.hidden) {
            replace(detailRow.firstElementChild!, eventDetail(ev));
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
    const invoiceId = typeof ev.data.invoice?.id === "string" ? ev.data.invoice.id : null;
    const deliveryId = typeof ev.data.delivery?.id === "string" ? ev.data.delivery.id : null;
    const base = `/console/stores/${encodeURIComponent(storeId)}`;
    return [
      h(
        "tr",
        { "data-event-id": ev.id },
        h("td", null, timeEl(ev.createdAt)),
        h("td", null, ev.type),
        h(
          "td",
          null,
          invoiceId !== null
            ? appLink(`${base}/deliveries?invoiceId=${encodeURIComponent(invoiceId)}`, invoiceId, ctx.navigate, { class: "mono", title: "Deliveries about this invoice" })
            : deliveryId !== null
              ? appLink(`${base}/deliveries/${encodeURIComponent(deliveryId)}`, deliveryId, ctx.navigate, { class: "mono" })
              : "—",
        ),
        h("td", { class: "mono" }, ev.id, " ", copyButton(`event id ${ev.id}`, () => ev.id)),
        h("td", null, toggle),
      ),
      detailRow,
    ];
  };

  const eventsList = pagedList<EventBody>({
    body: eventsBody,
    status: eventsStatus,
    moreLabel: "Older events",
    path: (cursor) => {
      const q = new URLSearchParams({ limit: "50" });
      if (filters.types) q.set("types", filters.types);
      if (filters.invoiceId) q.set("invoiceId", filters.invoiceId);
      if (cursor) q.set("cursor", cursor);
      return adminPath(storeId, "events") + `?${q.toString()}`;
    },
    row: eventRow,
    empty: "No events match.",
    onError: (err) => fail(err, eventsStatus),
  });
  const { more } = eventsList;
  const loadEvents = (fresh: boolean) => eventsList.load(fresh);

  const typeSelect = h("select", { name: "types", id: "events-type" }, h("option", { value: "" }, "any"), EVENT_TYPES.map((t) => h("option", { value: t }, t)));
  const invoiceInput = h("input", { name: "invoiceId", id: "events-invoice", type: "text", placeholder: "invoice id", value: filters.invoiceId, autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    {
      class: "filters",
      on: {
        submit: (e: Event) => {
          e.preventDefault();
          filters = { types: typeSelect.value, invoiceId: invoiceInput.value.trim() };
          void loadEvents(true);
        },
      },
    },
    h("label", { for: "events-type" }, "Type", typeSelect),
    h("label", { for: "events-invoice" }, "Invoice", invoiceInput),
    h("button", { type: "submit" }, "Filter"),
  );

  replace(
    root,
    h("header", { class: "page-head" }, h("h1", null, "Events"), appLink(`/console/stores/${encodeURIComponent(storeId)}/endpoints`, "Manage endpoints", ctx.navigate)),
    form,
    h(
      "div",
      { class: "scroll-x", tabindex: "0", role: "region", "aria-label": "Events" },
      h("table", { class: "log", "data-testid": "events" }, h("thead", null, h("tr", null, ["Created", "Type", "About", "Event", "Details"].map((t) => h("th", { scope: "col" }, t)))), eventsBody),
    ),
    eventsStatus,
    more,
  );
  // Endpoints first: an event's detail lists its attempts per endpoint.
  void loadEndpoints()
    .catch((err: unknown) => fail(err, eventsStatus))
    .then(() => loadEvents(true));

  return () => {
    live = false;
    eventsList.stop();
    for (const t of timers) clearTimeout(t);
  };
}
