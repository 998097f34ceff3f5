// A store's plugins: version, enabled flag, how their recent deliveries ended and the webhook URL to paste
// into the provider; enable or disable; install one from the catalogue with a form generated from its
// declared settings (the required ones marked and enforced).
import { adminPath, api } from "../lib/api.ts";
import { copyButton } from "../lib/copy.ts";
import { clear, h, replace } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";
import { timeEl } from "../lib/time.ts";
import { type CatalogEntry, catalogEntries, settingInputs } from "./plugin-settings.ts";

export interface PluginInfo {
  name: string;
  version: number;
  enabled: boolean;
  secretNames: string[];
  catalog: string | null;
  catalogBase: string | null;
  createdAt: string;
  updatedAt: string;
}

interface Outcomes {
  total: number;
  outcomes: Record<string, number>;
  lastAt: string | null;
}

const GOOD = new Set(["applied", "already_applied", "ignored", "duplicate_event"]);

export const webhookUrlOf = (storeId: string, name: string) => `${location.origin}/api/paymentPlugins?pluginName=${encodeURIComponent(name)}&storeId=${encodeURIComponent(storeId)}`;

function installForm(ctx: PageContext, entries: CatalogEntry[], done: (message: string) => void, fail: (err: unknown) => void): HTMLFormElement {
  const catalog = h("select", { name: "catalog", id: "install-catalog" }, entries.map((c) => h("option", { value: c.name }, `${c.name} — ${c.summary}`)));
  const name = h("input", { name: "name", id: "install-name", placeholder: "as in the webhook URL", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*" });
  const fields = h("div", { class: "settings-grid", "data-testid": "install-settings" });
  const install = h("button", { type: "submit" }, "Install");
  let inputs = settingInputs([], [], "install");
  const showSettings = () => {
    inputs = settingInputs(entries.find((c) => c.name === catalog.value)?.secrets ?? [], [], "install");
    replace(fields, inputs.fields);
  };
  catalog.addEventListener("change", showSettings);
  showSettings();
  const form = h(
    "form",
    {
      class: "panel",
      "data-testid": "install-form",
      "aria-labelledby": "install-title",
      on: {
        submit: (e) => {
          e.preventDefault();
          install.disabled = true;
          api<{ name: string; version: number }>("PUT", adminPath(ctx.storeId, "plugins", name.value.trim()), { catalog: catalog.value, secrets: inputs.values() })
            .then((r) => {
              form.reset();
              showSettings();
              done(`Installed ${r.name} v${r.version}`);
            })
            .catch(fail)
            .finally(() => (install.disabled = false));
        },
      },
    },
    h("h2", { id: "install-title" }, "Install from the catalogue"),
    h("div", { class: "row" }, h("label", { for: "install-catalog" }, "Plugin", catalog), h("label", { class: "grow", for: "install-name" }, "Name", name)),
    h("p", { class: "muted" }, "Its settings, stored encrypted and never shown again:"),
    fields,
    install,
  );
  return form;
}

function outcomesCell(ctx: PageContext, p: PluginInfo): HTMLTableCellElement {
  const cell = h("td", { "data-testid": "outcomes" }, h("span", { class: "muted" }, "…"));
  void api<Outcomes>("GET", `${adminPath(ctx.storeId, "plugins", p.name, "outcomes")}?last=50`)
    .then((o) => {
      clear(cell);
      if (o.total === 0) cell.append(h("span", { class: "muted" }, "no deliveries yet"));
      for (const [outcome, n] of Object.entries(o.outcomes).sort((a, b) => b[1] - a[1])) cell.append(h("span", { class: GOOD.has(outcome) ? "badge ok" : "badge bad" }, `${outcome} ${n}`));
      if (o.lastAt) cell.append(" last ", timeEl(o.lastAt));
    })
    .catch(() => clear(cell));
  return cell;
}

export function mount(root: HTMLElement, ctx: PageContext): void {
  const list = h("div", { "data-testid": "plugins-list" }, h("p", { class: "muted" }, "Loading…"));
  const message = h("p", { class: "status-line", role: "status" });
  const say = (text: string, kind: "ok" | "error") => {
    message.className = `status-line ${kind}`;
    message.textContent = text;
  };
  const fail = (err: unknown) => say(err instanceof Error ? err.message : String(err), "error");
  const installBox = h("div");

  const row = (p: PluginInfo) => {
    const toggle = () => void api("PUT", adminPath(ctx.storeId, "plugins", p.name), { enabled: !p.enabled }).then(load).catch(fail);
    const url = webhookUrlOf(ctx.storeId, p.name);
    return h(
      "tr",
      { "data-plugin": p.name },
      h("th", { scope: "row" }, h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/plugins/${encodeURIComponent(p.name)}` }, p.name)),
      h("td", null, `v${p.version}`),
      h("td", null, h("span", { class: p.enabled ? "badge ok" : "badge" }, p.enabled ? "enabled" : "disabled"), " ", h("button", { type: "button", class: "secondary", "aria-label": `${p.enabled ? "Disable" : "Enable"} plugin ${p.name}`, on: { click: toggle } }, p.enabled ? "Disable" : "Enable")),
      h("td", null, p.catalogBase ?? "—"),
      outcomesCell(ctx, p),
      h("td", { class: "url-cell" }, h("code", { class: "wrap", "data-testid": "webhook-url" }, url), " ", copyButton(`webhook URL of ${p.name}`, () => url)),
      h("td", null, timeEl(p.updatedAt)),
    );
  };

  async function load(): Promise<void> {
    const { data } = await api<{ data: PluginInfo[] }>("GET", adminPath(ctx.storeId, "plugins"));
    clear(list);
    if (data.length === 0) {
      list.append(h("p", { class: "muted" }, "No plugin yet: install one from the catalogue below."));
      return;
    }
    const headers = ["Name", "Version", "Enabled", "Catalogue", "Last 50 deliveries", "Webhook URL", "Updated"];
    list.append(
      h("div", { class: "scroll-x", tabindex: "0", role: "region", "aria-label": "Plugins" }, h("table", null, h("thead", null, h("tr", null, headers.map((t) => h("th", { scope: "col" }, t)))), h("tbody", null, data.map(row)))),
    );
  }

  root.append(h("h1", null, "Plugins"), message, list, installBox);
  load().catch((err: unknown) => {
    clear(list);
    fail(err);
  });
  catalogEntries()
    .then((entries) => replace(installBox, installForm(ctx, entries, (m) => (say(m, "ok"), void load().catch(fail)), fail)))
    .catch(fail);
}
