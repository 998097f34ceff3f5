// One plugin: the editor (CodeMirror: Lua highlighting, line numbers, completion of the sandbox's
// globals, compile errors on their line as you type), save as a new version, versions with their diff
// and roll back, and the test bench (the unsaved source beside the saved version on one input).
import { autocompletion, type Completion, type CompletionContext } from "@codemirror/autocomplete";
import { StreamLanguage } from "@codemirror/language";
import { lua } from "@codemirror/legacy-modes/mode/lua";
import { type Diagnostic, linter, lintGutter } from "@codemirror/lint";
import { MergeView } from "@codemirror/merge";
import { EditorState } from "@codemirror/state";
import { EditorView, basicSetup } from "codemirror";
import { ApiError, adminPath, api } from "../lib/api.ts";
import { clear, fmtTime, h, replace } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";
import type { PluginInfo } from "./plugins.ts";

interface Global {
  label: string;
  type: string;
  detail: string;
  info: string;
}
interface Version {
  version: number;
  sha256: string;
  catalog: string | null;
  createdAt: string;
  current: boolean;
}
interface RunError {
  kind: string;
  message: string;
  line?: number;
}
interface Simulation {
  plugin: { name: string; version: number; enabled: boolean; unsaved: boolean };
  result: unknown;
  error: RunError | null;
  logs: { description: string; type: string; at: string }[];
  fetches: { url: string; method: string; status: number | null; error: string | null; durationMs: number }[];
  durationMs: number;
}
interface Delivery {
  id: string;
  outcome: string;
  createdAt: string;
  invoiceId: string | null;
  transition: string | null;
  request: { method: string; headers: Record<string, string>; query: Record<string, string>; body: string; bodyBase64: string | null };
}
interface Fixture {
  name: string;
  description: string | null;
  request: Delivery["request"];
  receivedAt: string | null;
}

let globals: Promise<Global[]> | null = null;

function completionSource(list: Global[]) {
  const options: Completion[] = list.map((g) => ({
    label: g.label,
    type: g.type === "namespace" ? "namespace" : g.type,
    detail: g.type === "function" ? g.detail : g.detail,
    info: g.info,
  }));
  return (context: CompletionContext) => {
    const word = context.matchBefore(/[\w.]*/);
    if (!word || (word.from === word.to && !context.explicit)) return null;
    return { from: word.from, options, validFor: /^[\w.]*$/ };
  };
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

export function mount(root: HTMLElement, ctx: PageContext): () => void {
  const name = ctx.params.name ?? "";
  const pluginPath = adminPath(ctx.storeId, "plugins", name);
  const views: { destroy(): void }[] = [];
  const title = h("h1", null, name);
  const info = h("div", { class: "row muted", "data-testid": "plugin-info" });
  const status = h("p", { class: "status-line", role: "status", "data-testid": "editor-status" });
  const compile = h("span", { class: "muted", "data-testid": "compile-status" }, "");
  const editorBox = h("div", { class: "editor", "data-testid": "editor" });
  const versionsBox = h("div", { "data-testid": "versions" });
  const diffBox = h("div", { class: "diff" });
  const bench = h("div", { "data-testid": "bench" });
  let plugin: PluginInfo | null = null;
  let view: EditorView | null = null;

  const say = (text: string, kind: "ok" | "error" | "" = "") => {
    status.className = `status-line ${kind}`;
    status.textContent = text;
  };
  const fail = (err: unknown) => {
    if (err instanceof ApiError && err.status === 401) return;
    say(err instanceof Error ? err.message : String(err), "error");
  };
  const jumpTo = (line: number) => {
    if (!view) return;
    const l = view.state.doc.line(Math.max(1, Math.min(line, view.state.doc.lines)));
    view.dispatch({ selection: { anchor: l.from, head: l.to }, scrollIntoView: true });
    view.focus();
  };

  const checkLinter = linter(
    async (v): Promise<Diagnostic[]> => {
      const source = v.state.doc.toString();
      try {
        const r = await api<{ ok: boolean; errors: { line: number | null; message: string }[] }>("POST", adminPath(ctx.storeId, "plugins", "check"), { source });
        if (v.state.doc.toString() !== source) return [];
        if (r.ok) {
          compile.className = "ok";
          compile.textContent = "compiles";
          return [];
        }
        const e = r.errors[0]!;
        compile.className = "error";
        compile.textContent = e.line === null ? e.message : `line ${e.line}: ${e.message}`;
        const line = v.state.doc.line(Math.max(1, Math.min(e.line ?? 1, v.state.doc.lines)));
        return [{ from: line.from, to: Math.max(line.to, line.from), severity: "error", message: e.message }];
      } catch {
        return [];
      }
    },
    { delay: 400 },
  );

  const save = async () => {
    if (!view) return;
    try {
      const r = await api<{ version: number }>("PUT", pluginPath, { source: view.state.doc.toString() });
      say(`Saved as version ${r.version}`, "ok");
      await loadPlugin(false);
    } catch (err) {
      if (err instanceof ApiError && typeof err.details.line === "number") jumpTo(err.details.line);
      fail(err);
    }
  };

  const toolbar = h(
    "div",
    { class: "toolbar" },
    h("button", { type: "button", "data-testid": "save", on: { click: () => void save() } }, "Save as new version"),
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        "data-testid": "revert",
        on: {
          click: () => {
            if (view && plugin) void loadPlugin(true);
          },
        },
      },
      "Revert to saved",
    ),
    compile,
  );

  root.append(
    h("div", { class: "row spread" }, h("div", null, h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/plugins` }, "← Plugins"), title), info),
    status,
    h("div", { class: "split" }, h("div", null, toolbar, editorBox), h("div", null, h("h2", null, "Test bench"), bench)),
    h("h2", null, "Versions"),
    versionsBox,
    diffBox,
  );

  const loadPlugin = async (resetSource: boolean) => {
    const p = await api<PluginInfo & { source: string }>("GET", pluginPath);
    plugin = p;
    replace(
      info,
      h("span", { class: "badge" }, `v${p.version}`),
      h("span", { class: p.enabled ? "badge ok" : "badge" }, p.enabled ? "enabled" : "disabled"),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "data-testid": "toggle-enabled",
          on: { click: () => void api("PUT", pluginPath, { enabled: !p.enabled }).then(() => loadPlugin(false)).catch(fail) },
        },
        p.enabled ? "Disable" : "Enable",
      ),
      p.secretNames.length > 0 ? h("span", null, "secrets: ", p.secretNames.join(", ")) : null,
    );
    if (!view) {
      const list = await (globals ??= api<{ data: Global[] }>("GET", "/console/api/globals").then((r) => r.data));
      view = new EditorView({
        parent: editorBox,
        state: EditorState.create({
          doc: p.source,
          extensions: [
            basicSetup,
            StreamLanguage.define(lua),
            EditorState.languageData.of(() => [{ autocomplete: completionSource(list) }]),
            autocompletion({ activateOnTyping: true }),
            lintGutter(),
            checkLinter,
            EditorState.tabSize.of(2),
          ],
        }),
      });
      views.push(view);
    } else if (resetSource) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: p.source } });
    }
    await loadVersions();
  };

  const loadVersions = async () => {
    const { data } = await api<{ data: Version[] }>("GET", `${pluginPath}/versions`);
    const from = h("select", { "aria-label": "From version", "data-testid": "diff-from" }, data.map((v, i) => h("option", { value: String(v.version), selected: i === 1 }, `v${v.version}`)));
    const to = h("select", { "aria-label": "To version", "data-testid": "diff-to" }, data.map((v, i) => h("option", { value: String(v.version), selected: i === 0 }, `v${v.version}`)));
    replace(
      versionsBox,
      h(
        "table",
        null,
        h("thead", null, h("tr", null, h("th", null, "Version"), h("th", null, "Created"), h("th", null, "Catalogue"), h("th", null, "SHA-256"), h("th", null, ""))),
        h(
          "tbody",
          null,
          data.map((v) =>
            h(
              "tr",
              { "data-version": String(v.version) },
              h("td", null, `v${v.version}`, v.current ? h("span", { class: "badge ok" }, "current") : null),
              h("td", null, fmtTime(v.createdAt)),
              h("td", null, v.catalog ?? "—"),
              h("td", { class: "mono" }, v.sha256.slice(0, 12)),
              h(
                "td",
                null,
                v.current
                  ? null
                  : h(
                      "button",
                      {
                        type: "button",
                        class: "secondary",
                        on: {
                          click: () =>
                            void api("POST", `${pluginPath}/rollback`, { version: v.version })
                              .then(() => {
                                say(`Version ${v.version} is current again`, "ok");
                                return loadPlugin(true);
                              })
                              .catch(fail),
                        },
                      },
                      "Roll back to this",
                    ),
              ),
            ),
          ),
        ),
      ),
      data.length > 1
        ? h("div", { class: "toolbar" }, "Compare ", from, " with ", to, h("button", { type: "button", class: "secondary", "data-testid": "show-diff", on: { click: () => void showDiff(Number(from.value), Number(to.value)) } }, "Show diff"))
        : null,
    );
  };

  const showDiff = async (a: number, b: number) => {
    const [left, right] = await Promise.all([a, b].map((v) => api<{ source: string }>("GET", `${pluginPath}/versions/${v}`)));
    clear(diffBox);
    diffBox.append(h("p", { class: "muted" }, `v${a} (left) → v${b} (right)`));
    const host = h("div", { class: "editor", "data-testid": "diff" });
    diffBox.append(host);
    const readOnly = [basicSetup, StreamLanguage.define(lua), EditorState.readOnly.of(true), EditorView.editable.of(false)];
    views.push(new MergeView({ a: { doc: left!.source, extensions: readOnly }, b: { doc: right!.source, extensions: readOnly }, parent: host }));
  };

  mountBench(bench, ctx, name, () => view?.state.doc.toString() ?? "", jumpTo, fail);
  loadPlugin(false).catch(fail);
  return () => {
    for (const v of views) v.destroy();
  };
}

/** The test bench: an input (typed, a catalogue fixture, a recorded delivery), the unsaved and the saved run side by side. */
function mountBench(root: HTMLElement, ctx: PageContext, name: string, source: () => string, jumpTo: (line: number) => void, fail: (err: unknown) => void): void {
  const pluginPath = adminPath(ctx.storeId, "plugins", name);
  const headers = h("textarea", { rows: 4, name: "headers", "data-testid": "bench-headers", placeholder: "content-type: application/json\nx-signature: …" });
  const body = h("textarea", { rows: 8, name: "body", "data-testid": "bench-body", placeholder: '{"invoiceId": "…", "status": "paid"}' });
  const receivedAt = h("input", { name: "receivedAt", placeholder: "clock: ISO time (default now)", "data-testid": "bench-clock" });
  const deliveries = h("select", { "aria-label": "Recorded delivery", "data-testid": "bench-deliveries" }, h("option", { value: "" }, "a recorded delivery…"));
  const fixtures = h("select", { "aria-label": "Catalogue fixture", "data-testid": "bench-fixtures" }, h("option", { value: "" }, "a catalogue fixture…"));
  const loaded = h("p", { class: "muted", "data-testid": "bench-loaded" });
  const results = h("div", { class: "pair", "data-testid": "bench-results" });
  const actions = h("div", { class: "toolbar" });
  /** The body exactly as recorded when it is not text; cleared when the text is edited. */
  let bodyBase64: string | null = null;
  let deliveryId: string | null = null;
  let lastRun: { request: ReturnType<typeof input>; run: Simulation } | null = null;
  const fixtureList: Fixture[] = [];

  body.addEventListener("input", () => {
    bodyBase64 = null;
  });

  const setRequest = (r: Delivery["request"], clock: string | null, what: string) => {
    headers.value = Object.entries(r.headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join("\n");
    body.value = r.bodyBase64 === null ? r.body : "";
    bodyBase64 = r.bodyBase64;
    receivedAt.value = clock ?? "";
    loaded.textContent = r.bodyBase64 === null ? what : `${what} (binary body, ${atob(r.bodyBase64).length} bytes, sent as recorded)`;
  };

  const input = () => {
    const hs: Record<string, string> = {};
    for (const line of headers.value.split("\n")) {
      const i = line.indexOf(":");
      if (line.trim() === "") continue;
      if (i <= 0) throw new Error(`header line "${line}" is not name: value`);
      hs[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    return {
      headers: hs,
      ...(bodyBase64 !== null ? { bodyBase64 } : { body: body.value }),
      ...(receivedAt.value.trim() !== "" ? { receivedAt: new Date(receivedAt.value.trim()).toISOString() } : {}),
    };
  };

  const runView = (title: string, run: Simulation | Error) => {
    if (run instanceof Error) return h("div", { class: "panel" }, h("h2", null, title), h("p", { class: "error" }, run.message));
    const e = run.error;
    return h(
      "div",
      { class: "panel", "data-testid": run.plugin.unsaved ? "run-unsaved" : "run-saved" },
      h("h2", null, title, " ", h("span", { class: "muted" }, `${run.durationMs} ms`)),
      e
        ? h(
            "p",
            { class: "error", "data-testid": "run-error" },
            `${e.kind}: ${e.message} `,
            e.line !== undefined && run.plugin.unsaved ? h("button", { type: "button", class: "secondary", "data-testid": "jump-to-error", on: { click: () => jumpTo(e.line!) } }, `go to line ${e.line}`) : null,
          )
        : null,
      h("h3", null, "Result"),
      h("pre", { "data-testid": "run-result" }, pretty(run.result)),
      h("h3", null, `Logs (${run.logs.length})`),
      run.logs.length === 0 ? h("p", { class: "muted" }, "none") : h("pre", { "data-testid": "run-logs" }, run.logs.map((l) => `[${l.type}] ${l.description}`).join("\n")),
      h("h3", null, `Fetches (${run.fetches.length})`),
      run.fetches.length === 0 ? h("p", { class: "muted" }, "none") : h("pre", null, run.fetches.map((f) => `${f.method} ${f.url} → ${f.status ?? f.error ?? "?"} (${f.durationMs} ms)`).join("\n")),
    );
  };

  const run = async () => {
    let request: ReturnType<typeof input>;
    try {
      request = input();
    } catch (err) {
      fail(err);
      return;
    }
    replace(results, h("p", { class: "muted" }, "Running…"));
    const [unsaved, saved] = await Promise.all([
      api<Simulation>("POST", `${pluginPath}/simulate`, { ...request, source: source() }).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
      api<Simulation>("POST", `${pluginPath}/simulate`, request).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
    ]);
    lastRun = unsaved instanceof Error ? null : { request, run: unsaved };
    replace(results, runView("Edited (unsaved)", unsaved), runView(saved instanceof Error ? "Saved version" : `Saved version v${saved.plugin.version}`, saved));
    if (!(unsaved instanceof Error) && unsaved.error?.line !== undefined) jumpTo(unsaved.error.line);
  };

  const saveFixture = () => {
    if (!lastRun) return;
    const { request, run: r } = lastRun;
    const fixture = {
      description: `recorded in the console${deliveryId ? ` from delivery ${deliveryId}` : ""}`,
      request: { headers: request.headers, ...("bodyBase64" in request ? { bodyBase64: request.bodyBase64 } : { body: request.body }) },
      ...(request.receivedAt ? { now: request.receivedAt } : {}),
      expect: r.error ? { error: r.error.kind } : { result: r.result },
    };
    const blob = new Blob([JSON.stringify(fixture, null, 2) + "\n"], { type: "application/json" });
    const a = h("a", { download: `${name}-${deliveryId ?? "case"}.json` });
    a.href = URL.createObjectURL(blob);
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  };

  const replay = async () => {
    if (!deliveryId) return;
    try {
      const r = await api<{ deliveryId: string | null; status: number; response: unknown }>("POST", `${adminPath(ctx.storeId, "deliveries", deliveryId)}/replay`);
      const after = r.deliveryId ? await api<Delivery>("GET", adminPath(ctx.storeId, "deliveries", r.deliveryId)) : null;
      replace(
        replayed,
        `Replayed: HTTP ${r.status} `,
        h("code", null, JSON.stringify(r.response)),
        after ? h("span", null, " — ", h("a", { href: `/console/stores/${encodeURIComponent(ctx.storeId)}/deliveries/${encodeURIComponent(after.id)}` }, after.id), ` ${after.outcome}`, after.transition ? ` (${after.transition})` : "") : null,
      );
      replayed.className = r.status < 300 ? "ok" : "error";
    } catch (err) {
      fail(err);
    }
  };
  const replayed = h("p", { "data-testid": "replay-result" });

  deliveries.addEventListener("change", () => {
    const id = deliveries.value;
    if (!id) return;
    void api<Delivery>("GET", adminPath(ctx.storeId, "deliveries", id))
      .then((d) => {
        deliveryId = d.id;
        setRequest(d.request, d.createdAt, `Delivery ${d.id} (${d.outcome}), received ${fmtTime(d.createdAt)}: byte for byte, with its receipt time as the clock`);
        replayButton.disabled = false;
      })
      .catch(fail);
  });
  fixtures.addEventListener("change", () => {
    const f = fixtureList.find((x) => x.name === fixtures.value);
    if (!f) return;
    deliveryId = null;
    replayButton.disabled = true;
    setRequest(f.request, f.receivedAt, `Fixture ${f.name}${f.description ? `: ${f.description}` : ""} (run with this store's secrets)`);
  });

  const replayButton = h("button", { type: "button", class: "secondary", disabled: true, "data-testid": "bench-replay", on: { click: () => void replay() } }, "Replay this delivery (current version)");
  actions.append(
    h("button", { type: "button", "data-testid": "bench-run", on: { click: () => void run() } }, "Run"),
    h("button", { type: "button", class: "secondary", "data-testid": "bench-save-fixture", on: { click: saveFixture } }, "Save as fixture"),
    replayButton,
  );
  root.append(h("div", { class: "row" }, deliveries, fixtures), loaded, h("label", null, "Headers", headers), h("label", null, "Body", body), h("label", null, "Clock (receivedAt)", receivedAt), actions, replayed, results);

  const refreshDeliveries = () =>
    api<{ data: { id: string; outcome: string; createdAt: string; replayOf: string | null }[] }>("GET", `${adminPath(ctx.storeId, "deliveries")}?pluginName=${encodeURIComponent(name)}&limit=20`)
      .then(({ data }) => {
        clear(deliveries);
        deliveries.append(h("option", { value: "" }, data.length === 0 ? "no recorded delivery yet" : "a recorded delivery…"));
        for (const d of data) deliveries.append(h("option", { value: d.id }, `${fmtTime(d.createdAt)} ${d.outcome}${d.replayOf ? " (replay)" : ""} ${d.id}`));
      })
      .catch(fail);
  deliveries.addEventListener("focus", () => void refreshDeliveries());
  void refreshDeliveries();
  void api<PluginInfo>("GET", pluginPath)
    .then((p) => (p.catalog ? api<{ data: Fixture[] }>("GET", `/api/admin/catalog/${encodeURIComponent(p.catalog)}/fixtures`) : { data: [] }))
    .then(({ data }) => {
      fixtureList.push(...data);
      for (const f of data) fixtures.append(h("option", { value: f.name }, f.name));
      if (data.length === 0) fixtures.disabled = true;
    })
    .catch(() => undefined);
}
