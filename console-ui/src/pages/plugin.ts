// One plugin: the editor (CodeMirror, see plugin-editor.ts), saving as a deploy step (plugin-save.ts), the
// test bench (plugin-bench.ts), its settings (plugin-settings.ts) and versions (plugin-versions.ts). Work is
// never lost: every keystroke is kept as a draft in this browser (per store, plugin and base version) and
// offered back when the plugin opens again, leaving with unsaved changes asks first, and a session that
// ends while typing signs in again in place (lib/api.ts).
import type { Diagnostic } from "@codemirror/lint";
import type { EditorView } from "@codemirror/view";
import { ApiError, adminPath, api } from "../lib/api.ts";
import { copyable } from "../lib/copy.ts";
import { dropDraft, draftsOf, saveDraft, type Draft } from "../lib/drafts.ts";
import { h, replace } from "../lib/dom.ts";
import { setLeaveGuard } from "../lib/guard.ts";
import type { PageContext } from "../lib/page.ts";
import { localTime } from "../lib/time.ts";
import { bench } from "./plugin-bench.ts";
import { createEditor, type Global } from "./plugin-editor.ts";
import { openDeploy, type SaveAnswer, type SaveFlow } from "./plugin-save.ts";
import { catalogEntries, settingsPanel } from "./plugin-settings.ts";
import { versionsPanel } from "./plugin-versions.ts";
import { type PluginInfo, webhookUrlOf } from "./plugins.ts";

let globals: Promise<Global[]> | null = null;

interface PageState {
  plugin: PluginInfo | null;
  /** What the editor's text was based on. */
  base: { version: number; source: string };
  view: EditorView | null;
}

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const name = ctx.params.name ?? "";
  const pluginPath = adminPath(ctx.storeId, "plugins", name);
  const state: PageState = { plugin: null, base: { version: 0, source: "" }, view: null };
  const text = () => state.view?.state.doc.toString() ?? state.base.source;
  const dirty = () => state.view !== null && text() !== state.base.source;
  const el = pageElements();
  const { info, compile, editorBox } = el;
  const say = sayIn(el.status);
  const fail = (err: unknown) => say(err instanceof Error ? err.message : String(err), "error");
  const jumpTo = (line: number) => jumpToLine(state.view, line);
  const setText = (source: string) => state.view?.dispatch({ changes: { from: 0, to: state.view.state.doc.length, insert: source } });

  const testBench = bench(ctx, name, text, jumpTo, fail);
  const versions = versionsPanel(ctx.storeId, name, (v) => void reload(true).then(() => say(`Version ${v} is live again`, "ok")), fail);
  const settings = settingsPanel(ctx.storeId, name, (m) => say(m, "ok"), fail);

  const saveFlow = saveFlowFor(pluginPath, state, text, {
    saved: (a, basedOn) => {
      dropDraft(ctx.storeId, name, basedOn);
      say(saveMessage(a, basedOn), "ok");
      void reload(false).then(() => testBench.refreshSaved());
    },
    takeLive: (live) => {
      setText(live.source);
      say(`Version ${live.version} is in the editor. Your edit stays as a draft based on the older version.`, "ok");
    },
    failed: (err) => {
      if (err instanceof ApiError && typeof err.details.line === "number") jumpTo(err.details.line);
      fail(err);
    },
  });
  const deploy = () => {
    if (state.view) openDeploy(saveFlow);
  };

  const check = checker(ctx.storeId, compile, jumpTo);
  const drafts = draftKeeper(ctx.storeId, name, () => state.base);

  async function reload(resetSource: boolean): Promise<void> {
    const p = await api<PluginInfo & { source: string }>("GET", pluginPath);
    state.plugin = p;
    showInfo(info, p, ctx, () => void api("PUT", pluginPath, { enabled: !p.enabled }).then(() => reload(false)).catch(fail));
    const signable = p.catalogBase !== null && ((await catalogEntries()).find((c) => c.name === p.catalogBase)?.signable ?? false);
    testBench.setPlugin(p.catalogBase, signable);
    void settings.show(p.catalogBase, p.secretNames).catch(fail);
    if (!state.view) {
      state.base = { version: p.version, source: p.source };
      const list = await (globals ??= api<{ data: Global[] }>("GET", "/console/api/globals").then((r) => r.data));
      state.view = createEditor(editorBox, { doc: p.source, globals: list, check, onChange: drafts.keep, onSave: deploy });
      offerDraft(el.draftBanner, draftsOf(ctx.storeId, name).find((d) => d.source !== p.source) ?? null, p.version, (d) => void restore(d));
    } else if (resetSource) {
      state.base = { version: p.version, source: p.source };
      setText(p.source);
    }
    await versions.load();
  }

  async function restore(d: Draft): Promise<void> {
    const base = d.baseVersion === state.base.version ? state.base.source : (await api<{ source: string }>("GET", `${pluginPath}/versions/${d.baseVersion}`)).source;
    state.base = { version: d.baseVersion, source: base };
    setText(d.source);
    say(`Draft restored (based on version ${d.baseVersion}).`, "ok");
  }

  setLeaveGuard(() => (dirty() ? `Plugin ${name} has unsaved changes.` : null));
  root.append(...pageParts(ctx, name, el, { deploy, revert: () => void reload(true).catch(fail) }, [testBench.root, settings.root, versions.root]));
  reload(false).catch(fail);
  return () => {
    drafts.flush(state.view && dirty() ? text() : null);
    setLeaveGuard(null);
    versions.destroy();
    state.view?.destroy();
  };
}

/** The parts the page fills in as it loads: plugin info, status line, draft offer, compile status, editor. */
function pageElements(): PageElements {
  return {
    info: h("div", { class: "row muted", "data-testid": "plugin-info" }),
    status: h("p", { class: "status-line", role: "status", "data-testid": "editor-status" }),
    draftBanner: h("div", { "data-testid": "draft-banner", role: "region", "aria-label": "Unsaved draft" }),
    compile: h("span", { class: "muted", "data-testid": "compile-status", "aria-live": "polite" }),
    editorBox: h("div", { class: "editor", "data-testid": "editor" }),
  };
}

interface PageElements {
  info: HTMLElement;
  status: HTMLElement;
  draftBanner: HTMLElement;
  compile: HTMLElement;
  editorBox: HTMLElement;
}

/** The status line's say(): a message, good news or an error. */
function sayIn(status: HTMLElement): (message: string, kind?: "ok" | "error" | "") => void {
  return (message, kind = "") => {
    status.className = `status-line ${kind}`;
    status.textContent = message;
  };
}

/** The deploy step's wiring: the base it saves on, and what the page does after. */
function saveFlowFor(
  pluginPath: string,
  state: PageState,
  text: () => string,
  on: { saved: (a: SaveAnswer, basedOn: number) => void; takeLive: (live: { version: number; source: string }) => void; failed: (err: unknown) => void },
): SaveFlow {
  return {
    pluginPath,
    base: () => state.base,
    edited: text,
    onSaved: (a, basedOn) => {
      state.base = { version: a.version, source: text() };
      on.saved(a, basedOn);
    },
    onTakeLive: (live) => {
      state.base = live;
      on.takeLive(live);
    },
    onError: on.failed,
  };
}

/** Keeps the editor's text as a draft 250 ms after the last keystroke (and at once when the page is left). */
function draftKeeper(storeId: string, plugin: string, base: () => { version: number; source: string }) {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const write = (source: string) => {
    const b = base();
    if (source === b.source) dropDraft(storeId, plugin, b.version);
    else saveDraft({ storeId, plugin, baseVersion: b.version, source, at: Date.now() });
  };
  return {
    keep(source: string): void {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => write(source), 250);
    },
    flush(source: string | null): void {
      if (timer) clearTimeout(timer);
      if (source !== null) write(source);
    },
  };
}

function jumpToLine(v: EditorView | null, line: number): void {
  if (!v) return;
  const l = v.state.doc.line(Math.max(1, Math.min(line, v.state.doc.lines)));
  v.dispatch({ selection: { anchor: l.from, head: l.to }, scrollIntoView: true });
  v.focus();
}

/** The page: title and state, the webhook URL, the draft offer, the editor with its toolbar beside the bench, settings, versions. */
function pageParts(
  ctx: PageContext,
  name: string,
  el: PageElements,
  act: { deploy: () => void; revert: () => void },
  [benchRoot, settingsRoot, versionsRoot]: HTMLElement[],
): HTMLElement[] {
  const toolbar = h(
    "div",
    { class: "toolbar" },
    h("button", { type: "button", "data-testid": "save", "aria-keyshortcuts": "Control+S", on: { click: act.deploy } }, "Review and deploy…"),
    h("button", { type: "button", class: "secondary", "data-testid": "revert", on: { click: act.revert } }, "Revert to live"),
    el.compile,
  );
  return [
    h("div", { class: "row spread" }, h("div", null, h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/plugins` }, "← Plugins"), h("h1", null, name)), el.info),
    h("p", { class: "webhook-url" }, "Webhook URL for your provider: ", copyable("webhook URL", webhookUrlOf(ctx.storeId, name), { "data-testid": "webhook-url" })),
    el.draftBanner,
    el.status,
    h("div", { class: "split" }, h("section", { "aria-label": "Editor" }, toolbar, el.editorBox), benchRoot!),
    settingsRoot!,
    versionsRoot!,
  ];
}

function saveMessage(a: SaveAnswer, basedOn: number): string {
  if (!a.reused) return `Saved as version ${a.version}: it is live now.`;
  if (a.version === basedOn) return `No change: version ${a.version} stays live.`;
  return `Identical to version ${a.version}: no new version was made, and version ${a.version} is live again.`;
}

function showInfo(info: HTMLElement, p: PluginInfo, ctx: PageContext, toggle: () => void): void {
  replace(
    info,
    h("span", { class: "badge" }, `v${p.version} live`),
    h("span", { class: p.enabled ? "badge ok" : "badge" }, p.enabled ? "enabled" : "disabled"),
    h("button", { type: "button", class: "secondary", "data-testid": "toggle-enabled", "aria-label": `${p.enabled ? "Disable" : "Enable"} plugin ${p.name}`, on: { click: toggle } }, p.enabled ? "Disable" : "Enable"),
    p.catalogBase ? h("span", null, `from the catalogue: ${p.catalogBase}`) : null,
    h("span", { class: "sr-only" }, ctx.storeId),
  );
}

function offerDraft(banner: HTMLElement, draft: Draft | null, live: number, restore: (d: Draft) => void): void {
  if (draft === null) return;
  const older = draft.baseVersion !== live;
  replace(
    banner,
    h(
      "div",
      { class: "panel notice" },
      h("p", null, `You have unsaved changes from ${localTime(new Date(draft.at).toISOString())}, based on version ${draft.baseVersion}.`, older ? ` Version ${live} is live now: deploying them will show you what changed meanwhile.` : ""),
      h("button", { type: "button", "data-testid": "draft-restore", on: { click: () => (restore(draft), replace(banner)) } }, "Restore draft"),
      " ",
      h("button", { type: "button", class: "secondary", "data-testid": "draft-discard", on: { click: () => (dropDraftOf(draft), replace(banner)) } }, "Discard draft"),
    ),
  );
}

const dropDraftOf = (d: Draft) => dropDraft(d.storeId, d.plugin, d.baseVersion);

/** The compile check as you type: the error on its line, and a button to jump there. */
function checker(storeId: string, compile: HTMLElement, jumpTo: (line: number) => void) {
  return async (source: string): Promise<Diagnostic[]> => {
    try {
      const r = await api<{ ok: boolean; errors: { line: number | null; message: string }[] }>("POST", adminPath(storeId, "plugins", "check"), { source });
      if (r.ok) {
        compile.className = "ok";
        compile.textContent = "compiles";
        return [];
      }
      const e = r.errors[0]!;
      compile.className = "error";
      const at = e.line;
      replace(compile, at === null ? null : h("button", { type: "button", class: "secondary", "data-testid": "compile-jump", on: { click: () => jumpTo(at) } }, `line ${at}`), " ", e.message);
      const lines = source.split("\n");
      const lineNo = Math.max(1, Math.min(e.line ?? 1, lines.length));
      const from = lines.slice(0, lineNo - 1).reduce((n, l) => n + l.length + 1, 0);
      return [{ from, to: from + lines[lineNo - 1]!.length, severity: "error", message: e.message }];
    } catch {
      return [];
    }
  };
}
