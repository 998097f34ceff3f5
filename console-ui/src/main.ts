// The console's entry: a router over location.pathname under /console (history API), the layout with
// the store picker, and the pages. The editor page (CodeMirror) is loaded only when opened.
import "./styles.css";
import { ApiError, api, session, setSession, setUnauthorizedHandler, type Session } from "./lib/api.ts";
import { clear, h } from "./lib/dom.ts";
import type { Cleanup, Mount, PageContext } from "./lib/page.ts";
import * as signin from "./pages/signin.ts";
import * as plugins from "./pages/plugins.ts";
import * as deliveries from "./pages/deliveries.ts";
import * as delivery from "./pages/delivery.ts";
import * as events from "./pages/events.ts";

interface Route {
  pattern: RegExp;
  /** Names of the pattern's groups, in order. */
  keys: string[];
  /** Which top-level section it belongs to (highlighted in the navigation). */
  section: "plugins" | "deliveries" | "events";
  load: () => Mount | Promise<Mount>;
}

const route = (path: string, section: Route["section"], load: Route["load"]): Route => {
  const keys: string[] = [];
  const pattern = new RegExp(
    "^" +
      path.replace(/:([a-zA-Z]+)/g, (_m, key: string) => {
        keys.push(key);
        return "([^/]+)";
      }) +
      "/?$",
  );
  return { pattern, keys, section, load };
};

/** The route table (the console-watch helper adds its pages here). */
const ROUTES: Route[] = [
  route("/console/stores/:storeId/plugins", "plugins", () => plugins.mount),
  route("/console/stores/:storeId/plugins/:name", "plugins", async () => (await import("./pages/plugin.ts")).mount),
  route("/console/stores/:storeId/deliveries", "deliveries", () => deliveries.mount),
  route("/console/stores/:storeId/deliveries/:id", "deliveries", () => delivery.mount),
  route("/console/stores/:storeId/events", "events", () => events.mount),
];

const app = document.getElementById("app")!;
let cleanup: Cleanup | null = null;
let stores: { id: string; name: string }[] | null = null;
let rendering = 0;

function navigate(path: string): void {
  if (path !== location.pathname + location.search) history.pushState(null, "", path);
  void render();
}

function leave(): void {
  if (cleanup) {
    try {
      cleanup();
    } catch (err) {
      console.error(err);
    }
  }
  cleanup = null;
}

async function ensureSession(): Promise<Session | null> {
  if (session() !== null) return session();
  try {
    setSession(await api<Session>("GET", "/console/api/session"));
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) throw err;
    setSession(null);
  }
  return session();
}

async function render(): Promise<void> {
  const ticket = ++rendering;
  leave();
  const path = decodeURIComponent(location.pathname);
  const ctx: PageContext = { storeId: "", params: {}, navigate };
  if (path === "/console/signin") {
    stores = null;
    clear(app);
    const root = h("main", { class: "bare" });
    app.append(root);
    signin.mount(root, ctx);
    return;
  }
  const current = await ensureSession();
  if (ticket !== rendering) return;
  if (current === null) {
    history.replaceState(null, "", `/console/signin?next=${encodeURIComponent(location.pathname)}`);
    return render();
  }
  stores ??= (await api<{ data: { id: string; name: string }[] }>("GET", "/api/admin/stores")).data;
  if (ticket !== rendering) return;

  const match = ROUTES.map((r) => ({ r, m: r.pattern.exec(path) })).find((x) => x.m !== null);
  if (!match) {
    const first = stores[0];
    if ((path === "/console" || path === "/console/") && first) {
      history.replaceState(null, "", `/console/stores/${encodeURIComponent(first.id)}/plugins`);
      return render();
    }
    layout("", null, h("h1", null, stores.length === 0 ? "No store yet" : "Not found"), stores.length === 0 ? h("p", null, "Create a store with ", h("code", null, "storefront stores create NAME"), ".") : null);
    return;
  }
  const params: Record<string, string> = {};
  match.r.keys.forEach((k, i) => (params[k] = match.m![i + 1]!));
  ctx.storeId = params.storeId ?? "";
  ctx.params = params;
  const root = h("div", { class: "page" });
  layout(ctx.storeId, match.r.section, root);
  if (!stores.some((s) => s.id === ctx.storeId)) {
    root.append(h("h1", null, "Not found"), h("p", null, "No store ", ctx.storeId, "."));
    return;
  }
  try {
    const mount = await match.r.load();
    if (ticket !== rendering) return;
    cleanup = mount(root, ctx) ?? null;
  } catch (err) {
    root.append(h("p", { class: "error" }, err instanceof Error ? err.message : String(err)));
  }
}

function layout(storeId: string, section: Route["section"] | null, ...content: (Node | null)[]): void {
  clear(app);
  const current = session();
  const picker = h(
    "select",
    {
      "aria-label": "Store",
      "data-testid": "store-picker",
      on: {
        change: () => navigate(`/console/stores/${encodeURIComponent(picker.value)}/${section ?? "plugins"}`),
      },
    },
    (stores ?? []).map((s) => h("option", { value: s.id, selected: s.id === storeId }, `${s.name} (${s.id})`)),
  );
  const link = (name: Route["section"], label: string) =>
    h("a", { href: storeId ? `/console/stores/${encodeURIComponent(storeId)}/${name}` : "/console", class: section === name ? "active" : null }, label);
  app.append(
    h(
      "header",
      { class: "top" },
      h("a", { href: "/console", class: "brand" }, "storefront"),
      picker,
      h("nav", null, link("plugins", "Plugins"), link("deliveries", "Deliveries"), link("events", "Events")),
      h("span", { class: "who" }, current?.kind === "admin" ? "admin" : (current?.email ?? "")),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "data-testid": "signout",
          on: {
            click: () => {
              void api("DELETE", "/console/api/session")
                .catch(() => undefined)
                .then(() => {
                  setSession(null);
                  stores = null;
                  navigate("/console/signin");
                });
            },
          },
        },
        "Sign out",
      ),
    ),
    h("main", null, ...content),
  );
}

// Links inside the console change the page without reloading it.
document.addEventListener("click", (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = (event.target as Element | null)?.closest?.("a");
  if (!a || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/console")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", () => void render());
setUnauthorizedHandler(() => {
  setSession(null);
  stores = null;
  navigate(`/console/signin?expired=1&next=${encodeURIComponent(location.pathname)}`);
});

void render();
