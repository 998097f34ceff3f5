// A store's webhook endpoints, managed as Svix's App Portal does: add, edit (URL, description, event
// types), enable or disable, reveal and rotate the signing secret, send a test event and read the answer,
// recover the deliveries that failed since a time, and each attempt with the receiver's status, headers
// and body.
import { adminPath, api, ApiError } from "../lib/api.ts";
import { type Attempt, answerText, attemptsTable } from "../lib/attempts.ts";
import { copyable } from "../lib/copy.ts";
import { h, replace } from "../lib/dom.ts";
import { errorText, notFound } from "../lib/log-views.ts";
import type { PageContext } from "../lib/page.ts";
import type { Paged } from "../lib/paged-list.ts";
import { EVENT_TYPES } from "./events.ts";

export interface Endpoint {
  id: string;
  url: string;
  description: string;
  types: string[];
  enabled: boolean;
  disabledReason: string | null;
  apiVersion: string;
}

/** URL, description and event types: the add form, and the edit form filled with an endpoint's values. */
function endpointForm(idPrefix: string, submitLabel: string, initial: Partial<Endpoint>, submit: (body: { url: string; description: string; types: string[] }) => Promise<void>): HTMLFormElement {
  const url = h("input", { type: "url", name: "url", id: `${idPrefix}-url`, required: true, value: initial.url ?? "", placeholder: "https://example.com/webhooks" });
  const description = h("input", { type: "text", name: "description", id: `${idPrefix}-description`, value: initial.description ?? "" });
  const types = EVENT_TYPES.map((t) => h("label", { class: "toggle" }, h("input", { type: "checkbox", name: "types", value: t, checked: initial.types?.includes(t) ?? false }), ` ${t}`));
  const button = h("button", { type: "submit" }, submitLabel);
  const out = h("p", { class: "status-line", role: "status" });
  const form = h(
    "form",
    {
      class: "endpoint-form",
      on: {
        submit: (e: Event) => {
          e.preventDefault();
          button.disabled = true;
          const chosen = types.map((l) => l.querySelector("input")!).filter((i) => i.checked).map((i) => i.value);
          submit({ url: url.value.trim(), description: description.value, types: chosen })
            .catch((err: unknown) => (out.className = "status-line error", out.textContent = errorText(err)))
            .finally(() => (button.disabled = false));
        },
      },
    },
    h("label", { for: `${idPrefix}-url` }, "URL", url),
    h("label", { for: `${idPrefix}-description` }, "Description", description),
    h("fieldset", null, h("legend", null, "Event types (none ticked: every type)"), types),
    button,
    out,
  );
  return form;
}

/** The tools of one endpoint; `out` shows what each did. */
function endpointTools(storeId: string, ep: Endpoint, out: HTMLElement, reload: () => void): HTMLElement {
  const path = (...tail: string[]) => adminPath(storeId, "endpoints", ep.id, ...tail);
  const show = (...content: (Node | string | null)[]) => replace(out, ...content);
  const failed = (err: unknown) => show(h("p", { class: "error" }, errorText(err)));
  const type = h("select", { name: "test-type", "aria-label": `Test event type for ${ep.url}` }, EVENT_TYPES.map((t) => h("option", { value: t }, t)));
  const since = h("input", { type: "datetime-local", name: "since", step: "1", "aria-label": `Recover failed deliveries to ${ep.url} since (your local time)` });
  const act = (label: string, testid: string, run: () => Promise<void>, cls = "secondary") => h("button", { type: "button", class: cls, "data-testid": testid, "aria-label": `${label}: ${ep.url}`, on: { click: () => void run().catch(failed) } }, label);

  const reveal = async () => {
    const s = await api<{ secret: string; previousSecret: string | null; previousSecretExpiresAt: string | null }>("GET", path("secret"));
    show(h("p", null, "Signing secret: ", copyable("signing secret", s.secret, { "data-testid": "endpoint-secret" })), s.previousSecret ? h("p", { class: "muted" }, "The previous secret still signs until ", s.previousSecretExpiresAt ?? "", ": ", copyable("previous signing secret", s.previousSecret)) : null);
  };
  const rotate = async () => {
    if (!window.confirm("Rotate the signing secret? The old one keeps signing for 24 hours, so your receiver can switch over.")) return;
    const r = await api<{ secret: string; previousSecretExpiresAt: string }>("POST", path("rotate-secret"));
    show(h("p", null, "New signing secret: ", copyable("new signing secret", r.secret, { "data-testid": "endpoint-secret" }), ` (the old one signs too until ${r.previousSecretExpiresAt})`));
  };
  const test = async () => {
    show(h("p", { class: "muted" }, "Sending…"));
    const r = await api<{ eventId: string; responseStatus: number | null; responseHeaders: Record<string, string>; responseExcerpt: string; error: string | null; durationMs: number }>("POST", path("test"), { type: type.value });
    const ok = r.responseStatus !== null && r.responseStatus < 300;
    show(h("p", { class: ok ? "ok" : "error" }, `Test event ${r.eventId}: `, r.error ?? `HTTP ${r.responseStatus} in ${Math.round(r.durationMs)} ms`), h("pre", { tabindex: "0", "data-testid": "test-answer" }, answerText(r.responseStatus, r.responseHeaders, r.responseExcerpt)));
  };
  const recover = async () => {
    if (since.value === "") throw new Error("Choose the time to recover from");
    const r = await api<{ recovered: number; more: boolean }>("POST", path("recover"), { since: new Date(since.value).toISOString() });
    show(h("p", { class: "ok", "data-testid": "recover-result" }, `${r.recovered} event${r.recovered === 1 ? "" : "s"} queued again${r.more ? " (more remain: recover again)" : ""}.`));
  };
  const attempts = async () => {
    const page = await api<Paged<Attempt>>("GET", `${path("attempts")}?limit=50`);
    show(h("h3", null, "Attempts"), page.data.length === 0 ? h("p", { class: "muted" }, "No attempts yet.") : h("div", { class: "scroll-x", tabindex: "0", role: "region", "aria-label": `Attempts to ${ep.url}` }, attemptsTable(page.data, true)));
  };
  const toggle = async () => {
    await api("PATCH", path(), { enabled: !ep.enabled });
    reload();
  };
  const edit = async () => {
    show(endpointForm(`edit-${ep.id}`, "Save endpoint", ep, async (body) => {
      await api("PATCH", path(), body);
      reload();
    }));
  };
  return h(
    "div",
    { class: "toolbar" },
    act("Edit", "endpoint-edit", edit),
    act(ep.enabled ? "Disable" : "Enable", "endpoint-toggle", toggle),
    act("Reveal secret", "endpoint-reveal", reveal),
    act("Rotate secret", "endpoint-rotate", rotate),
    type,
    act("Send test event", "endpoint-test", test),
    since,
    act("Recover failed", "endpoint-recover", recover),
    act("Attempts", "endpoint-attempts", attempts),
  );
}

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const { storeId } = ctx;
  let live = true;
  const list = h("div", { "data-testid": "endpoints" }, h("p", { class: "muted" }, "Loading…"));
  const created = h("div", { role: "status" });

  const card = (ep: Endpoint) => {
    const out = h("div", { class: "endpoint-out", "aria-live": "polite" });
    return h(
      "article",
      { class: "panel endpoint", "data-endpoint-id": ep.id, "aria-label": `Endpoint ${ep.url}` },
      h("h2", { class: "mono wrap" }, ep.url),
      h("p", null, ep.enabled ? h("span", { class: "badge ok" }, "enabled") : [h("span", { class: "badge bad" }, "disabled"), " ", ep.disabledReason ?? ""], " ", ep.description, " · ", ep.types.length === 0 ? "every event type" : ep.types.join(", "), ` · API ${ep.apiVersion} · `, copyable(`endpoint id ${ep.id}`, ep.id)),
      endpointTools(storeId, ep, out, () => void load()),
      out,
    );
  };

  async function load(): Promise<void> {
    try {
      const { data } = await api<{ data: Endpoint[] }>("GET", adminPath(storeId, "endpoints"));
      if (!live) return;
      replace(list, data.length === 0 ? h("p", { class: "muted" }, "No endpoints yet: add one below.") : data.map(card));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404 && err.code === "store_not_found") replace(root, notFound("Store"));
      else replace(list, h("p", { class: "error" }, errorText(err)));
    }
  }

  const add = endpointForm("add-endpoint", "Add endpoint", {}, async (body) => {
    const ep = await api<Endpoint & { secret: string }>("POST", adminPath(storeId, "endpoints"), body);
    replace(created, h("p", { class: "ok" }, `Added ${ep.url}. Its signing secret (you can reveal it again later): `, copyable("new endpoint's signing secret", ep.secret)));
    add.reset();
    await load();
  });
  replace(root, h("header", { class: "page-head" }, h("h1", null, "Endpoints")), created, list, h("section", { class: "panel", "aria-labelledby": "add-endpoint-title" }, h("h2", { id: "add-endpoint-title" }, "Add an endpoint"), add));
  void load();
  return () => {
    live = false;
  };
}
