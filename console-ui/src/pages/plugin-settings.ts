// A plugin's settings (its `secrets`), changed without touching its code: a form generated from the
// catalogue plugin's declared settings (name, required, description, default), or free NAME=value rows for
// a plugin of the merchant's own. Values are never shown; a field left empty keeps what is stored.
import { adminPath, api } from "../lib/api.ts";
import { h, replace } from "../lib/dom.ts";

export interface DeclaredSetting {
  name: string;
  required: boolean;
  description: string;
  default?: string;
}

export interface CatalogEntry {
  name: string;
  summary: string;
  secrets: DeclaredSetting[];
  signable: boolean;
}

let catalog: Promise<CatalogEntry[]> | null = null;
export const catalogEntries = () => (catalog ??= api<{ data: CatalogEntry[] }>("GET", "/api/admin/catalog").then((r) => r.data));

/** One input per declared setting, for the install form and the settings form. */
export function settingInputs(declared: DeclaredSetting[], stored: string[], idPrefix: string): { fields: HTMLElement[]; values(): Record<string, string> } {
  const inputs = declared.map((s) => {
    const input = h("input", {
      type: "password",
      name: s.name,
      id: `${idPrefix}-${s.name}`,
      autocomplete: "off",
      required: s.required && !stored.includes(s.name),
      placeholder: stored.includes(s.name) ? "stored: leave empty to keep" : s.default !== undefined ? `default: ${s.default}` : "",
    });
    const label = h("label", { class: "setting", for: `${idPrefix}-${s.name}` }, h("span", null, h("code", null, s.name), s.required ? h("span", { class: "badge warn" }, "required") : null), h("span", { class: "muted small" }, s.description));
    return { s, input, field: h("div", { class: "setting-field" }, label, input) };
  });
  return {
    fields: inputs.map((i) => i.field),
    values: () => Object.fromEntries(inputs.filter((i) => i.input.value !== "").map((i) => [i.s.name, i.input.value])),
  };
}

export function settingsPanel(storeId: string, name: string, onSaved: (text: string) => void, fail: (err: unknown) => void): { root: HTMLElement; show(catalogBase: string | null, stored: string[]): Promise<void> } {
  const body = h("div");
  const root = h("section", { class: "panel", "aria-labelledby": "settings-title", "data-testid": "settings" }, h("h2", { id: "settings-title" }, "Settings (secrets)"), body);

  const show = async (catalogBase: string | null, stored: string[]) => {
    const declared = catalogBase === null ? [] : ((await catalogEntries()).find((c) => c.name === catalogBase)?.secrets ?? []);
    const undeclared = stored.filter((n) => !declared.some((d) => d.name === n));
    const inputs = settingInputs(declared, stored, "setting");
    const extra = h("textarea", { name: "extra", id: "settings-extra", rows: 2, placeholder: "otherSetting=value (one NAME=value per line)" });
    const save = h("button", { type: "submit", "data-testid": "settings-save" }, "Save settings");
    const form = h(
      "form",
      {
        on: {
          submit: (e: Event) => {
            e.preventDefault();
            const given: Record<string, string> = { ...inputs.values() };
            for (const line of extra.value.split("\n")) {
              const i = line.indexOf("=");
              if (line.trim() !== "" && i > 0) given[line.slice(0, i).trim()] = line.slice(i + 1);
            }
            const keep = stored.filter((n) => !(n in given) && !(form.elements.namedItem(`drop-${n}`) as HTMLInputElement | null)?.checked);
            save.disabled = true;
            api<{ secretNames: string[] }>("PUT", adminPath(storeId, "plugins", name, "secrets"), { secrets: given, keep })
              .then((p) => {
                onSaved(`Settings saved (${p.secretNames.join(", ") || "none"}); the code and its version are unchanged.`);
                return show(catalogBase, p.secretNames);
              })
              .catch(fail)
              .finally(() => (save.disabled = false));
          },
        },
      },
      h("p", { class: "muted" }, catalogBase === null ? "A plugin of your own: any settings it reads." : `Declared by the catalogue plugin ${catalogBase}. Values are stored encrypted and never shown.`),
      inputs.fields,
      undeclared.length === 0 ? null : h("fieldset", null, h("legend", null, "Other stored settings"), undeclared.map((n) => h("label", { class: "toggle" }, h("input", { type: "checkbox", name: `drop-${n}` }), ` remove ${n}`))),
      h("label", { for: "settings-extra" }, "Other settings", extra),
      save,
    );
    replace(body, form);
  };
  return { root, show };
}
