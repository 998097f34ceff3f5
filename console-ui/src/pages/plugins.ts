// A store's plugins: version, enabled flag and recent outcomes; install from the catalogue.
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

export function mount(root: HTMLElement, ctx: PageContext): void {
  const list = h("div", { "data-testid": "plugins-list" }, h("p", { class: "muted" }, "Loading…"));
  root.append(h("div", { class: "row spread" }, h("h1", null, "Plugins")), list);

  const load = async () => {
    try {
      const { data } = await api<{ data: PluginInfo[] }>("GET", adminPath(ctx.storeId, "plugins"));
      clear(list);
      if (data.length === 0) {
        list.append(h("p", { class: "muted" }, "No plugin yet."));
        return;
      }
      list.append(
        h(
          "table",
          null,
          h("thead", null, h("tr", null, h("th", null, "Name"), h("th", null, "Version"), h("th", null, "Enabled"), h("th", null, "Catalogue"), h("th", null, "Updated"))),
          h(
            "tbody",
            null,
            data.map((p) =>
              h(
                "tr",
                { "data-plugin": p.name },
                h("td", null, h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/plugins/${encodeURIComponent(p.name)}` }, p.name)),
                h("td", null, `v${p.version}`),
                h("td", null, h("span", { class: p.enabled ? "badge ok" : "badge" }, p.enabled ? "enabled" : "disabled")),
                h("td", null, p.catalog ?? "—"),
                h("td", null, fmtTime(p.updatedAt)),
              ),
            ),
          ),
        ),
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return;
      clear(list);
      list.append(h("p", { class: "error" }, err instanceof Error ? err.message : String(err)));
    }
  };
  void load();
}
