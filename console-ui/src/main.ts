// The console's entry: a router over location.pathname under /console (history API), the layout with the
// store picker, and the pages. The layout paints at once, before any data arrives; the editor page
// (CodeMirror) is loaded only when opened. A session that ends while working signs in again in a dialog
// (lib/signin-form.ts) instead of leaving the page; leaving a page with unsaved work asks first.
import "./styles.css";
import { ApiError, api, session, setReauthenticate, setSession, type Session } from "./lib/api.ts";
import { clear, h } from "./lib/dom.ts";
import { mayLeave, setLeaveGuard } from "./lib/guard.ts";
import type { Cleanup, Mount, PageContext } from "./lib/page.ts";
import { signInAgain } from "./lib/signin-form.ts";
import * as signin from "./pages/signin.ts";
import * as plugins from "./pages/plugins.ts";
import * as deliveries from "./pages/deliveries.ts";
import * as delivery from "./pages/delivery.ts";
import * as events from "./pages/events.ts";
import * as endpoints from "./pages/endpoints.ts";

type Section = "plugins" | "deliveries" | "events" | "endpoints";

interface Route {
  pattern: RegExp;
  /** Names of the pattern's groups, in order. */
  keys: string[];
  /** Which top-level section it belongs to (highlighted in the navigation). */
  section: Section;
  load: () => Mount | Promise<Mount>;
}

const route = (path: string, section: Section, load: Route["load"]): Route => {
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

const ROUTES: Route[] = [
  route("/console/stores/:storeId/plugins", "plugins", () => plugins.mount),
  route("/console/stores/:storeId/plugins/:name", "plugins", async () => (await import("./pages/plugin.ts")).mount),
  route("/console/stores/:storeId/deliveries", "deliveries", () => deliveries.mount),
  route("/console/stores/:storeId/deliveries/:id", "deliveries", () => delivery.mount),
  route("/console/stores/:storeId/events", "events", () => events.mount),
  route("/console/stores/:storeId/endpoints", "endpoints", () => endpoints.mount),
];
const SECTIONS: [Section, string][] = [
  ["plugins", "Plugins"],
  ["deliveries", "Deliveries"],
  ["events", "Events"],
  ["endpoints", "Endpoints"],
];

const app = document.getElementById("app")!;
let cleanup: Cleanup | null = null;
let stores: { id: string; name: string }[] | null = null;
let rendering = 0;

function navigate(path: string): void {
  if (path === location.pathname + location.search) return void render();
  if (!mayLeave()) return;
  history.pushState(null, "", path);
  void render();
}

function leave(): void {
  try {
    cleanup?.();
  } catch (err) {
    console.error(err);
  }
  cleanup = null;
  setLeaveGuard(null);
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

function matchRoute(path: string): { r: Route; params: Record<string, string> } | null {
  for (const r of ROUTES) {
    const m = r.pattern.exec(path);
    if (m) return { r, params: Object.fromEntries(r.keys.map((k, i) => [k, m[i + 1]!])) };
  }
  return null;
}

async function render(): Promise<void> {
  const ticket = ++rendering;
  leave();
  const path = decodeURIComponent(location.pathname);
  const ctx: PageContext = { storeId: "", params: {}, navigate };
  if (path === "/console/signin") {
    stores = null;
    clear(app);
    const root = h("main", { class: "bare", id: "content" });
    app.append(root);
    signin.mount(root, ctx);
    return;
  }
  const match = matchRoute(path);
  // The shell first: header and navigation paint before the session and the data arrive.
  const root = h("div", { class: "page", "aria-busy": "true" }, h("p", { class: "muted" }, "Loading…"));
  layout(match?.params.storeId ?? "", match?.r.section ?? null, root);
  const current = await ensureSession();
  if (ticket !== rendering) return;
  if (current === null) {
    history.replaceState(null, "", `/console/signin?next=${encodeURIComponent(location.pathname)}`);
    return render();
  }
  stores ??= (await api<{ data: { id: string; name: string }[] }>("GET", "/api/admin/stores")).data;
  if (ticket !== rendering) return;
  fillHeader(match?.params.storeId ?? "");
  root.removeAttribute("aria-busy");
  clear(root);
  if (!match) {
    const first = stores[0];
    if ((path === "/console" || path === "/console/") && first) {
      history.replaceState(null, "", `/console/stores/${encodeURIComponent(first.id)}/plugins`);
      return render();
    }
    root.append(h("h1", null, stores.length === 0 ? "No store yet" : "Not found"));
    if (stores.length === 0) root.append(h("p", null, "Create a store with ", h("code", null, "storefront stores create NAME"), "."));
    return;
  }
  ctx.storeId = match.params.storeId ?? "";
  ctx.params = match.params;
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

const picker = h("select", { "aria-label": "Store", "data-testid": "store-picker" });
const who = h("span", { class: "who" });

function fillHeader(storeId: string): void {
  clear(picker);
  picker.append(...(stores ?? []).map((s) => h("option", { value: s.id, selected: s.id === storeId }, `${s.name} (${s.id})`)));
  const current = session();
  who.textContent = current?.kind === "admin" ? "admin" : (current?.email ?? "");
}

function layout(storeId: string, section: Section | null, content: Node): void {
  clear(app);
  picker.onchange = () => navigate(`/console/stores/${encodeURIComponent(picker.value)}/${section ?? "plugins"}`);
  const link = (name: Section, label: string) =>
    h("a", { href: storeId ? `/console/stores/${encodeURIComponent(storeId)}/${name}` : "/console", class: section === name ? "active" : null, "aria-current": section === name ? "page" : null }, label);
  const signOut = () => {
    if (!mayLeave()) return;
    setLeaveGuard(null);
    void api("DELETE", "/console/api/session")
      .catch(() => undefined)
      .then(() => {
        setSession(null);
        stores = null;
        navigate("/console/signin");
      });
  };
  app.append(
    h("a", { href: "#content", class: "skip-link", on: { click: (e: Event) => (e.preventDefault(), document.getElementById("content")?.focus()) } }, "Skip to content"),
    h(
      "header",
      { class: "top" },
      h("a", { href: "/console", class: "brand" }, "storefront"),
      picker,
      h("nav", { "aria-label": "Sections" }, SECTIONS.map(([name, label]) => link(name, label))),
      h("div", { class: "account" }, who, h("button", { type: "button", class: "secondary", "data-testid": "signout", on: { click: signOut } }, "Sign out")),
    ),
    h("main", { id: "content", tabindex: "-1" }, content),
  );
  if (stores !== null) fillHeader(storeId);
}

// Links inside the console change the page without reloading it.
document.addEventListener("click", (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = (event.target as Element | null)?.closest?.("a");
  if (!a || a.target || a.hasAttribute("download") || a.getAttribute("href")?.startsWith("#")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/console")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", () => void render());
setReauthenticate(async () => {
  if (!(await signInAgain())) return false;
  // Signed in again, perhaps as someone else: the header shows the new session's stores.
  stores = (await api<{ data: { id: string; name: string }[] }>("GET", "/api/admin/stores")).data;
  fillHeader(matchRoute(decodeURIComponent(location.pathname))?.params.storeId ?? "");
  return true;
});

void render();
