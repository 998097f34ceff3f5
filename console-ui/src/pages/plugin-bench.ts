// The test bench: an input (typed, a catalogue fixture, or a recorded delivery run by id on the server, any
// size, on its receipt time), optionally signed with this store's own secret, and the unsaved source beside
// the saved version on it. After a save the saved side runs again, so it shows the new version.
import { ApiError, adminPath, api } from "../lib/api.ts";
import { copyButton } from "../lib/copy.ts";
import { clear, h, replace } from "../lib/dom.ts";
import { pretty } from "../lib/log-views.ts";
import type { PageContext } from "../lib/page.ts";
import { localTime } from "../lib/time.ts";

interface Simulation {
  plugin: { name: string; version: number; enabled: boolean; unsaved: boolean };
  result: unknown;
  error: { kind: string; message: string; line?: number } | null;
  logs: { description: string; type: string; at: string }[];
  fetches: { url: string; method: string; status: number | null; error: string | null; durationMs: number }[];
  durationMs: number;
  request: { headers: Record<string, string>; receivedAt: string; signed: boolean };
}
interface RequestShape {
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  body: string;
  bodyBase64: string | null;
}
interface Fixture {
  name: string;
  description: string | null;
  request: RequestShape;
  receivedAt: string | null;
}
type Input = Record<string, unknown>;

export interface Bench {
  root: HTMLElement;
  /** The plugin (re)loaded: which catalogue plugin it came from, so fixtures and signing can be offered. */
  setPlugin(catalogBase: string | null, signable: boolean): void;
  /** A new version was saved: run the saved side again on the last input. */
  refreshSaved(): void;
}

export function bench(ctx: PageContext, name: string, source: () => string, jumpTo: (line: number) => void, fail: (err: unknown) => void): Bench {
  const pluginPath = adminPath(ctx.storeId, "plugins", name);
  const headers = h("textarea", { rows: 4, name: "headers", id: "bench-headers", "data-testid": "bench-headers", placeholder: "content-type: application/json\nx-signature: …" });
  const body = h("textarea", { rows: 8, name: "body", id: "bench-body", "data-testid": "bench-body", placeholder: '{"invoiceId": "…", "status": "paid"}' });
  const clock = h("input", { name: "receivedAt", id: "bench-clock", placeholder: "ISO time (default now)", "data-testid": "bench-clock" });
  const sign = h("input", { type: "checkbox", name: "sign", "data-testid": "bench-sign", disabled: true });
  const signLabel = h("label", { class: "toggle", title: "Only for plugins installed from the catalogue whose provider signs with a shared secret" }, sign, " Sign with this store's secret");
  const deliveries = h("select", { "aria-label": "Recorded delivery", "data-testid": "bench-deliveries" }, h("option", { value: "" }, "a recorded delivery…"));
  const fixtures = h("select", { "aria-label": "Catalogue fixture", "data-testid": "bench-fixtures", disabled: true }, h("option", { value: "" }, "a catalogue fixture…"));
  const loaded = h("p", { class: "muted", "data-testid": "bench-loaded" });
  const results = h("div", { class: "pair", "data-testid": "bench-results" });
  const replayed = h("p", { "data-testid": "replay-result", "aria-live": "polite" });
  /** The recorded delivery the input is, until the input is edited (then it is typed input). */
  let deliveryId: string | null = null;
  let bodyBase64: string | null = null;

  const edited = () => {
    if (deliveryId !== null) loaded.textContent = `Edited: runs the text above, no longer delivery ${deliveryId} as recorded`;
    deliveryId = null;
    bodyBase64 = null;
    replayButton.disabled = true;
  };
  for (const field of [body, headers]) field.addEventListener("input", edited);

  const setRequest = (r: RequestShape, at: string | null, what: string) => {
    headers.value = Object.entries(r.headers).map(([k, v]) => `${k}: ${v}`).join("\n");
    body.value = r.bodyBase64 === null ? r.body : "";
    bodyBase64 = r.bodyBase64;
    clock.value = at ?? "";
    loaded.textContent = r.bodyBase64 === null ? what : `${what} (binary body, sent as recorded)`;
  };

  const input = (): Input => (deliveryId !== null ? { deliveryId, ...(sign.checked ? { sign: true } : {}) } : typedInput());
  const typedInput = () => typedInputOf(headers.value, bodyBase64, body.value, clock.value, sign.checked);

  const runner = benchRunner(pluginPath, source, results, jumpTo);
  const run = () => {
    try {
      void runner.run(input(), typedInput());
    } catch (err) {
      fail(err);
    }
  };
  const replayButton = h("button", { type: "button", class: "secondary", disabled: true, "data-testid": "bench-replay", on: { click: () => void (deliveryId && replay(ctx.storeId, deliveryId, replayed).catch(fail)) } }, "Replay this delivery (live version)");
  const fixtureButton = h("button", { type: "button", class: "secondary", "data-testid": "bench-save-fixture", on: { click: () => runner.lastUnsaved && saveFixture(name, deliveryOf(runner.lastUnsaved.request), runner.lastUnsaved) } }, "Save as fixture");
  const deliveryOf = (request: Input) => (typeof request.deliveryId === "string" ? request.deliveryId : null);

  const sources = inputSources(ctx, name, deliveries, fixtures, fail, {
    delivery: (d) => {
      setRequest(d.request, d.createdAt, `Delivery ${d.id} (${d.outcome}), received ${localTime(d.createdAt)}: run on the server byte for byte, with its receipt time as the clock`);
      deliveryId = d.id;
      replayButton.disabled = false;
    },
    fixture: (f) => {
      edited();
      setRequest(f.request, f.receivedAt, `Fixture ${f.name}${f.description ? `: ${f.description}` : ""}. Its signature was made with the catalogue's test secret: tick "Sign with this store's secret" to run it as your provider would send it.`);
    },
  });

  const setPlugin = (catalogBase: string | null, signable: boolean) => {
    sign.disabled = !signable;
    if (!signable) sign.checked = false;
    sources.loadFixtures(catalogBase);
  };

  const root = h(
    "section",
    { "data-testid": "bench", "aria-labelledby": "bench-title" },
    h("h2", { id: "bench-title" }, "Test bench"),
    h("div", { class: "row" }, deliveries, fixtures),
    loaded,
    h("label", { for: "bench-headers" }, "Headers", headers),
    h("label", { for: "bench-body" }, "Body", body),
    h("label", { for: "bench-clock" }, "Clock (receivedAt)", clock),
    h("div", { class: "toolbar" }, h("button", { type: "button", "data-testid": "bench-run", on: { click: run } }, "Run"), signLabel, fixtureButton, replayButton),
    replayed,
    results,
  );
  return { root, setPlugin, refreshSaved: () => runner.refreshSaved() };
}

/** The typed input as the simulate route takes it: headers from `name: value` lines, the body, the clock. */
function typedInputOf(headerLines: string, bodyBase64: string | null, body: string, clock: string, sign: boolean): Input {
  const hs: Record<string, string> = {};
  for (const line of headerLines.split("\n")) {
    if (line.trim() === "") continue;
    const i = line.indexOf(":");
    if (i <= 0) throw new Error(`header line "${line}" is not name: value`);
    hs[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return {
    headers: hs,
    ...(bodyBase64 !== null ? { bodyBase64 } : { body }),
    ...(clock.trim() !== "" ? { receivedAt: new Date(clock.trim()).toISOString() } : {}),
    ...(sign ? { sign: true } : {}),
  };
}

/** Runs an input through the unsaved source and the saved version side by side; after a save, the saved side again. */
function benchRunner(pluginPath: string, source: () => string, results: HTMLElement, jumpTo: (line: number) => void) {
  let last: Input | null = null;
  const simulate = (request: Input, unsaved: boolean) =>
    api<Simulation>("POST", `${pluginPath}/simulate`, unsaved ? { ...request, source: source() } : request).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
  const savedView = (saved: Simulation | Error) => runView(saved instanceof Error ? "Saved version" : `Saved version v${saved.plugin.version}`, saved, jumpTo);
  const runner = {
    /** The last unsaved run with its input as typed (what "Save as fixture" writes). */
    lastUnsaved: null as { request: Input; typed: Input; run: Simulation } | null,
    async run(request: Input, typed: Input): Promise<void> {
      last = request;
      replace(results, h("p", { class: "muted" }, "Running…"));
      const [unsaved, saved] = await Promise.all([simulate(request, true), simulate(request, false)]);
      runner.lastUnsaved = unsaved instanceof Error ? null : { request, typed, run: unsaved };
      replace(results, runView("Edited (unsaved)", unsaved, jumpTo), savedView(saved));
      if (!(unsaved instanceof Error) && unsaved.error?.line !== undefined) jumpTo(unsaved.error.line);
    },
    refreshSaved(): void {
      const request = last;
      const box = results.querySelector('[data-testid="run-saved"]');
      if (request === null || box === null) return;
      void simulate(request, false).then((saved) => {
        if (request === last) box.replaceWith(savedView(saved));
      });
    },
  };
  return runner;
}

/** The recorded deliveries (refreshed on focus) and the catalogue's fixtures to pick an input from. */
function inputSources(
  ctx: PageContext,
  name: string,
  deliveries: HTMLSelectElement,
  fixtures: HTMLSelectElement,
  fail: (err: unknown) => void,
  picked: { delivery: (d: { id: string; outcome: string; createdAt: string; request: RequestShape }) => void; fixture: (f: Fixture) => void },
): { loadFixtures(catalogBase: string | null): void } {
  let fixtureList: Fixture[] = [];
  deliveries.addEventListener("change", () => {
    if (!deliveries.value) return;
    void api<{ id: string; outcome: string; createdAt: string; request: RequestShape }>("GET", adminPath(ctx.storeId, "deliveries", deliveries.value)).then(picked.delivery).catch(fail);
  });
  fixtures.addEventListener("change", () => {
    const f = fixtureList.find((x) => x.name === fixtures.value);
    if (f) picked.fixture(f);
  });
  const refreshDeliveries = () =>
    api<{ data: { id: string; outcome: string; createdAt: string; replayOf: string | null; eventType: string | null }[] }>("GET", `${adminPath(ctx.storeId, "deliveries")}?pluginName=${encodeURIComponent(name)}&limit=20`)
      .then(({ data }) => {
        const chosen = deliveries.value;
        clear(deliveries);
        deliveries.append(h("option", { value: "" }, data.length === 0 ? "no recorded delivery yet" : "a recorded delivery…"));
        for (const d of data) deliveries.append(h("option", { value: d.id, selected: d.id === chosen }, `${localTime(d.createdAt)} ${d.outcome}${d.eventType ? ` ${d.eventType}` : ""}${d.replayOf ? " (replay)" : ""} ${d.id}`));
      })
      .catch(fail);
  deliveries.addEventListener("focus", () => void refreshDeliveries());
  void refreshDeliveries();
  return {
    loadFixtures(catalogBase) {
      if (catalogBase === null || fixtureList.length > 0) return;
      void api<{ data: Fixture[] }>("GET", `/api/admin/catalog/${encodeURIComponent(catalogBase)}/fixtures`)
        .then(({ data }) => {
          fixtureList = data;
          for (const f of data) fixtures.append(h("option", { value: f.name }, f.name));
          fixtures.disabled = data.length === 0;
        })
        .catch((err: unknown) => (err instanceof ApiError && err.status === 404 ? undefined : fail(err)));
    },
  };
}

async function replay(storeId: string, deliveryId: string, out: HTMLElement): Promise<void> {
  const r = await api<{ deliveryId: string | null; status: number }>("POST", `${adminPath(storeId, "deliveries", deliveryId)}/replay`);
  const after = r.deliveryId ? await api<{ id: string; outcome: string; transition: string | null }>("GET", adminPath(storeId, "deliveries", r.deliveryId)) : null;
  const link = after ? h("a", { href: `/console/stores/${encodeURIComponent(storeId)}/deliveries/${encodeURIComponent(after.id)}` }, after.id) : null;
  replace(out, `Replayed: HTTP ${r.status}`, after ? [" — ", link, ` ${after.outcome}`, after.transition ? ` (${after.transition})` : ""] : null);
  out.className = r.status < 300 ? "ok" : "error";
}

/** Downloads the last unsaved run as a fixture for `storefront plugins test`. */
function saveFixture(name: string, deliveryId: string | null, last: { typed: Input; run: Simulation }): void {
  const { typed, run } = last;
  const fixture = {
    description: `recorded in the console${deliveryId ? ` from delivery ${deliveryId}` : ""}`,
    request: { headers: run.request.signed ? run.request.headers : typed.headers, ...("bodyBase64" in typed ? { bodyBase64: typed.bodyBase64 } : { body: typed.body }) },
    now: run.request.receivedAt,
    expect: run.error ? { error: run.error.kind } : { result: run.result },
  };
  const blob = new Blob([JSON.stringify(fixture, null, 2) + "\n"], { type: "application/json" });
  const a = h("a", { download: `${name}-${deliveryId ?? "case"}.json` });
  a.href = URL.createObjectURL(blob);
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function runView(title: string, run: Simulation | Error, jumpTo: (line: number) => void): HTMLElement {
  if (run instanceof Error) return h("div", { class: "panel" }, h("h3", null, title), h("p", { class: "error" }, run.message));
  const e = run.error;
  const signature = run.request.signed ? Object.entries(run.request.headers).filter(([k]) => /sig|timestamp|webhook-id/.test(k)) : [];
  return h(
    "div",
    { class: "panel run", "data-testid": run.plugin.unsaved ? "run-unsaved" : "run-saved" },
    h("h3", null, title, " ", h("span", { class: "muted" }, `${run.durationMs} ms`)),
    e
      ? h(
          "p",
          { class: "error", "data-testid": "run-error" },
          `${e.kind}: ${e.message} `,
          e.line !== undefined && run.plugin.unsaved ? h("button", { type: "button", class: "secondary", "data-testid": "jump-to-error", on: { click: () => jumpTo(e.line!) } }, `go to line ${e.line}`) : null,
        )
      : null,
    signature.length === 0 ? null : h("div", { "data-testid": "run-signature" }, h("h4", null, "Signed with this store's secret"), signature.map(([k, v]) => h("p", { class: "mono wrap" }, `${k}: ${v} `, copyButton(`${k} (${run.plugin.unsaved ? "unsaved" : "saved"} run)`, () => v)))),
    h("h4", null, "Result"),
    h("pre", { "data-testid": "run-result", tabindex: "0" }, pretty(run.result)),
    h("h4", null, `Logs (${run.logs.length})`),
    run.logs.length === 0 ? h("p", { class: "muted" }, "none") : h("pre", { "data-testid": "run-logs", tabindex: "0" }, run.logs.map((l) => `[${l.type}] ${l.description}`).join("\n")),
    h("h4", null, `Fetches (${run.fetches.length})`),
    run.fetches.length === 0 ? h("p", { class: "muted" }, "none") : h("pre", { tabindex: "0" }, run.fetches.map((f) => `${f.method} ${f.url} → ${f.status ?? f.error ?? "?"} (${f.durationMs} ms)`).join("\n")),
  );
}
