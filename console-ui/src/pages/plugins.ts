// A store's plugins: version, enabled flag and how their recent deliveries ended; enable or disable;
// install one from the catalogue.
import { ApiError, adminPath, api } from "../lib/api.ts";
import { clear, fmtTime, h } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";

export interface PluginInfo {
  name: string;
  version: number;
  enabled: boolean;
  secretNames: string[];
  catalog: string | null;
  createdAt: string;
  updatedAt: string;
}

interface Outcomes {
  total: number;
  outcomes: Record<string, number>;
  lastAt: string | null;
}

const GOOD = new Set(["applied", "already_applied", "ignored", "duplicate_event"]);

/** `NAME=value` lines → an object (blank lines and # comments skipped). */
export function parseSecrets(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const i = t.indexOf("=");
    if (i <= 0) throw new Error(`"${t}" is not NAME=value`);
    out[t.slice(0, i).trim()] = t.slice(i + 1);
  }
  return out;
}

export function mount(root: HTMLElement, ctx: PageContext): void {
  const list = h("div", { "data-testid": "plugins-list" }, h("p", { class: "muted" }, "Loading…"));
  const message = h("p", { class: "status-line", role: "status" });
  const catalog = h("select", { name: "catalog", "aria-label": "Catalogue plugin" });
  const name = h("input", { name: "name", placeholder: "name (as in the webhook URL)", required: true, pattern: "[A-Za-z0-9_.-]+" });
  const secrets = h("textarea", { name: "secrets", rows: 3, placeholder: "signingSecret=…   (one NAME=value per line; stored encrypted, never shown again)" });
  const install = h("button", { type: "submit" }, "Install");
  const fail = (err: unknown) => {
    if (err instanceof ApiError && err.status === 401) return;
    message.className = "status-line error";
    message.textContent = err instanceof Error ? err.message : String(err);
  };

  root.append(
    h("h1", null, "Plugins"),
    message,
    list,
    h(
      "form",
      {
        class: "panel",
        "data-testid": "install-form",
        on: {
          submit: (e) => {
            e.preventDefault();
            void (async () => {
              install.disabled = true;
              try {
                const body = { catalog: catalog.value, secrets: parseSecrets(secrets.value) };
                const r = await api<{ name: string; version: number }>("PUT", adminPath(ctx.storeId, "plugins", name.value.trim()), body);
                message.className = "status-line ok";
                message.textContent = `Installed ${r.name} v${r.version}`;
                secrets.value = "";
                await load();
              } catch (err) {
                fail(err);
              } finally {
                install.disabled = false;
              }
            })();
          },
        },
      },
      h("h2", null, "Install from the catalogue"),
      h("div", { class: "row" }, h("label", null, "Plugin", catalog), h("label", { class: "grow" }, "Name", name)),
      h("label", null, "Secrets", secrets),
      install,
    ),
  );

  const row = (p: PluginInfo) => {
    const outcomes = h("td", { "data-testid": "outcomes" }, h("span", { class: "muted" }, "…"));
    const toggle = h(
      "button",
      {
        type: "button",
        class: "secondary",
        on: {
          click: () => {
            void api("PUT", adminPath(ctx.storeId, "plugins", p.name), { enabled: !p.enabled })
              .then(load)
              .catch(fail);
          },
        },
      },
      p.enabled ? "Disable" : "Enable",
    );
    void api<Outcomes>("GET", `${adminPath(ctx.storeId, "plugins", p.name, "outcomes")}?last=50`)
      .then((o) => {
        clear(outcomes);
        if (o.total === 0) outcomes.append(h("span", { class: "muted" }, "no deliveries yet"));
        for (const [outcome, n] of Object.entries(o.outcomes).sort((a, b) => b[1] - a[1])) {
          outcomes.append(h("span", { class: GOOD.has(outcome) ? "badge ok" : "badge bad" }, `${outcome} ${n}`));
        }
        if (o.lastAt) outcomes.append(h("span", { class: "muted" }, ` last ${fmtTime(o.lastAt)}`));
      })
      .catch(() => clear(outcomes));
    return h(
      "tr",
      { "data-plugin": p.name },
      h("td", null, h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/plugins/${encodeURIComponent(p.name)}` }, p.name)),
      h("td", null, `v${p.version}`),
      h("td", null, h("span", { class: p.enabled ? "badge ok" : "badge" }, p.enabled ? "enabled" : "disabled"), " ", toggle),
      h("td", null, p.catalog ?? "—"),
      outcomes,
      h("td", null, fmtTime(p.updatedAt)),
    );
  };

  const load = async () => {
    try {
      const { data } = await api<{ data: PluginInfo[] }>("GET", adminPath(ctx.storeId, "plugins"));
      clear(list);
      if (data.length === 0) {
        list.append(h("p", { class: "muted" }, "No plugin yet: install one from the catalogue below."));
        return;
      }
      list.append(
        h(
          "table",
          null,
          h("thead", null, h("tr", null, h("th", null, "Name"), h("th", null, "Version"), h("th", null, "Enabled"), h("th", null, "Catalogue"), h("th", null, "Last 50 deliveries"), h("th", null, "Updated"))),
          h("tbody", null, data.map(row)),
        ),
      );
    } catch (err) {
      clear(list);
      fail(err);
    }
  };
  void load();
  void api<{ data: { name: string; summary: string }[] }>("GET", "/api/admin/catalog")
    .then(({ data }) => {
      for (const c of data) catalog.append(h("option", { value: c.name }, `${c.name} — ${c.summary}`));
    })
    .catch(fail);
}
