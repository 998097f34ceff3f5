// A plugin's versions: when each was saved and why (its note), which is live, roll back to one, and the
// diff of any two with unchanged code collapsed.
import { adminPath, api } from "../lib/api.ts";
import { clear, h, replace } from "../lib/dom.ts";
import { timeEl } from "../lib/time.ts";
import { diffView } from "./plugin-editor.ts";

export interface Version {
  version: number;
  sha256: string;
  catalog: string | null;
  note: string | null;
  createdAt: string;
  current: boolean;
}

export interface VersionsPanel {
  root: HTMLElement;
  load(): Promise<Version[]>;
  destroy(): void;
}

export function versionsPanel(storeId: string, name: string, onRolledBack: (version: number) => void, fail: (err: unknown) => void): VersionsPanel {
  const pluginPath = adminPath(storeId, "plugins", name);
  const list = h("div", { "data-testid": "versions" });
  const diffBox = h("div", { class: "diff-box" });
  let destroyDiff: (() => void) | null = null;

  const rollback = (v: number) =>
    void api("POST", `${pluginPath}/rollback`, { version: v })
      .then(() => onRolledBack(v))
      .catch(fail);

  const showDiff = async (a: number, b: number) => {
    const [left, right] = await Promise.all([a, b].map((v) => api<{ source: string }>("GET", `${pluginPath}/versions/${v}`)));
    destroyDiff?.();
    clear(diffBox);
    const host = h("div", { class: "editor diff", "data-testid": "diff" });
    diffBox.append(h("p", { class: "muted" }, `v${a} (left) → v${b} (right); unchanged code is folded`), host);
    const view = diffView(host, { doc: left!.source, label: `Version ${a}` }, { doc: right!.source, label: `Version ${b}` });
    destroyDiff = () => view.destroy();
  };

  const row = (v: Version) =>
    h(
      "tr",
      { "data-version": String(v.version) },
      h("td", null, `v${v.version}`, v.current ? h("span", { class: "badge ok" }, "live") : null),
      h("td", null, timeEl(v.createdAt)),
      h("td", { class: "wrap" }, v.note ?? ""),
      h("td", null, v.catalog ?? "—"),
      h("td", { class: "mono" }, v.sha256.slice(0, 12)),
      h("td", null, v.current ? h("span", { class: "muted" }, "live now") : h("button", { type: "button", class: "secondary", "aria-label": `Roll back to version ${v.version}`, on: { click: () => rollback(v.version) } }, "Roll back")),
    );

  const load = async () => {
    const { data } = await api<{ data: Version[] }>("GET", `${pluginPath}/versions`);
    const from = h("select", { "aria-label": "From version", "data-testid": "diff-from" }, data.map((v, i) => h("option", { value: String(v.version), selected: i === 1 }, `v${v.version}`)));
    const to = h("select", { "aria-label": "To version", "data-testid": "diff-to" }, data.map((v, i) => h("option", { value: String(v.version), selected: i === 0 }, `v${v.version}`)));
    replace(
      list,
      h(
        "div",
        { class: "scroll-x", tabindex: "0", role: "region", "aria-label": "Versions" },
        h(
          "table",
          null,
          h("thead", null, h("tr", null, ["Version", "Saved", "Note", "Catalogue", "SHA-256", "Action"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", null, data.map(row)),
        ),
      ),
      data.length > 1
        ? h("div", { class: "toolbar" }, "Compare ", from, " with ", to, h("button", { type: "button", class: "secondary", "data-testid": "show-diff", on: { click: () => void showDiff(Number(from.value), Number(to.value)).catch(fail) } }, "Show diff"))
        : null,
    );
    return data;
  };

  return { root: h("section", { "aria-labelledby": "versions-title" }, h("h2", { id: "versions-title" }, "Versions"), list, diffBox), load, destroy: () => destroyDiff?.() };
}
