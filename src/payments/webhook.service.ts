// A payment webhook from arrival to answer, in five steps: load the store's plugin, run it in the
// sandbox, decide what its outcome means, apply the decision through the invoice state machine, and
// record the delivery. Also replay (a stored delivery through the current version, on the original
// clock) and simulation (a dry run that changes nothing).
// The plugin's decision is applied exactly as it returned it. Secret values are scrubbed only from what
// is recorded or shown (logs, fetches, error messages, stored copies), never from the decision itself.
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { AppError, type ErrorCode, errorBody } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { refreshReadModel } from "../lib/read-model.ts";
import { applyPluginAction, type TransitionResult } from "../invoices/invoice-transitions.ts";
import type { InvoicesRepository } from "../invoices/invoices.repository.ts";
import type { FetchRecord, LogLine, PluginResult, RunOutcome, Sandbox } from "../sandbox/index.ts";
import type { DeliveriesRepository, DeliveryOutcome, DeliveryRecord } from "./deliveries.repository.ts";
import type { PluginsService, RunnablePlugin } from "../plugins/plugins.service.ts";

export interface WebhookInput {
  storeId: string;
  pluginName: string;
  method: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  query: Record<string, string>;
  body: Buffer;
  requestId: string;
  replayOf?: string | null;
  /** Receipt time of the original delivery, for a replay: the script's clock reads it. */
  receivedAt?: number;
}

export interface WebhookAnswer {
  status: number;
  body: unknown;
  deliveryId: string | null;
  /** Seconds, for 503 answers the provider should retry. */
  retryAfter?: number;
}

export interface SimulationInput {
  body: Buffer;
  headers?: Record<string, string>;
  query?: Record<string, string>;
  method?: string;
  version?: number;
  /** The script's clock (os.time, os.date), e.g. a recorded delivery's receipt time; default now. */
  receivedAt?: number;
  /** Unsaved source to run instead of the stored version (the console's test bench), with the plugin's secrets. */
  source?: string;
}

export interface SimulationResult {
  /** `unsaved`: the run was of the given source, not of `version` (which it is based on). */
  plugin: { name: string; version: number; enabled: boolean; unsaved: boolean };
  result: unknown;
  error: { kind: string; message: string; line?: number } | null;
  logs: LogLine[];
  fetches: FetchRecord[];
  durationMs: number;
}

export interface WebhookService {
  handle(input: WebhookInput): Promise<WebhookAnswer>;
  replay(storeId: string, deliveryId: string, requestId: string): Promise<WebhookAnswer>;
  simulate(storeId: string, pluginName: string, input: SimulationInput): Promise<SimulationResult>;
  pruneDeliveries(): Promise<number>;
}

export interface WebhookDeps {
  db: Kysely<Database>;
  plugins: PluginsService;
  invoices: InvoicesRepository;
  deliveries: DeliveriesRepository;
  sandbox: Sandbox;
  retentionDays: number;
  /** Bodies of deliveries nobody verified (unknown or disabled plugin, rejected) are kept up to this many bytes. */
  unverifiedBodyBytes?: number;
  /** Per store, the delivery log keeps at most this many bytes of bodies (oldest go first); 0 = no cap. */
  storeMaxBodyBytes?: number;
  now: () => number;
}


/** Replaces each secret value (4+ characters) in a string; longest first so overlapping values stay hidden. */
export function createRedactor(secrets: Record<string, string>): (text: string) => string {
  const values = Object.values(secrets)
    .filter((v) => v.length >= 4)
    .sort((a, b) => b.length - a.length);
  if (values.length === 0) return (t) => t;
  return (text) => {
    let out = text;
    for (const v of values) if (out.includes(v)) out = out.split(v).join("[secret]");
    return out;
  };
}

/** The recorded copy of a JSON value: every string scrubbed; keys and structure left as they are. */
export function scrubValue(value: unknown, redact: (t: string) => string): unknown {
  if (typeof value === "string") return redact(value);
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, redact));
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubValue(v, redact)]));
  return value;
}

/** What a run leaves to be recorded and shown, scrubbed. The result itself is never touched here. */
interface RunTraces {
  logs: LogLine[];
  fetches: FetchRecord[];
  error: { kind: string; message: string; line?: number } | null;
}

function scrubTraces(outcome: RunOutcome, redact: (t: string) => string): RunTraces {
  return {
    logs: outcome.logs.map((l) => ({ ...l, description: redact(l.description) })),
    fetches: outcome.fetches.map((f) => ({ ...f, url: redact(f.url), error: f.error === null ? null : redact(f.error) })),
    error: outcome.ok ? null : { ...outcome.error, message: redact(outcome.error.message) },
  };
}

/** An applied event is known by the plugin's eventId, else by the SHA-256 of the raw body. */
export function eventKeyOf(result: PluginResult, body: Buffer): string {
  return result.eventId !== undefined ? `id:${result.eventId}` : `sha256:${createHash("sha256").update(body).digest("hex")}`;
}

const RUN_ERROR_ANSWER: Record<Exclude<RunOutcome, { ok: true }>["error"]["kind"], { status: number; code: ErrorCode; outcome: DeliveryOutcome; showMessage: boolean }> = {
  rejected: { status: 401, code: "webhook_rejected", outcome: "rejected", showMessage: true },
  timeout: { status: 504, code: "plugin_timeout", outcome: "plugin_timeout", showMessage: false },
  busy: { status: 503, code: "service_unavailable", outcome: "plugin_busy", showMessage: true },
  script_error: { status: 500, code: "plugin_error", outcome: "plugin_error", showMessage: true },
  invalid_result: { status: 500, code: "plugin_error", outcome: "plugin_error", showMessage: true },
  memory_limit: { status: 500, code: "plugin_error", outcome: "plugin_error", showMessage: true },
  killed: { status: 500, code: "plugin_error", outcome: "plugin_error", showMessage: false },
};

/** Seconds a provider is asked to wait when the service cannot take a delivery now. */
const RETRY_AFTER_SECONDS = 30;
/** ... and when the store's sandbox queue is full: it drains in seconds. */
const BUSY_RETRY_AFTER_SECONDS = 5;
const DEFAULT_UNVERIFIED_BODY_BYTES = 4096;

type RecordFields = Pick<DeliveryRecord, "outcome" | "result" | "error" | "logs" | "fetches" | "invoiceId" | "transition" | "responseStatus" | "responseBody">;

/** One delivery in progress: its id, its clock, and how to record it. */
interface Delivery {
  id: string;
  input: WebhookInput;
  receivedAt: number;
  fail(code: ErrorCode, message: string, extra?: Record<string, unknown>): unknown;
  record(fields: RecordFields, options?: { pluginVersion?: number | null; redact?: (t: string) => string; verified?: boolean; tx?: Transaction<Database> }): Promise<void>;
}

export function createWebhookService(deps: WebhookDeps): WebhookService {
  const { db, plugins, invoices, deliveries, sandbox, now } = deps;
  const unverifiedBodyBytes = deps.unverifiedBodyBytes ?? DEFAULT_UNVERIFIED_BODY_BYTES;

  function begin(input: WebhookInput): Delivery {
    const id = newId("dlv");
    const receivedAt = now();
    const started = performance.now();
    return {
      id,
      input,
      receivedAt,
      fail: (code, message, extra = {}) => errorBody(code, message, input.requestId, extra),
      record: (fields, { pluginVersion = null, redact = (t: string) => t, verified = true, tx } = {}) =>
        deliveries.insert(
          {
            id,
            storeId: input.storeId,
            pluginName: input.pluginName,
            pluginVersion,
            replayOf: input.replayOf ?? null,
            method: input.method,
            headers: input.headers,
            query: input.query,
            // Nobody vouched for an unverified body: keep its start, not a stranger's megabyte.
            body: verified ? input.body : input.body.subarray(0, unverifiedBodyBytes),
            bodyBytes: input.body.length,
            createdAt: receivedAt,
            durationMs: performance.now() - started,
            ...fields,
            result: scrubValue(fields.result, redact),
            responseBody: scrubValue(fields.responseBody, redact),
          },
          tx,
        ),
    };
  }

  /** Step 1: the store's plugin with its secrets, or the answer when there is none to run. */
  async function load(d: Delivery): Promise<{ plugin: RunnablePlugin } | { answer: WebhookAnswer }> {
    const { input } = d;
    try {
      const plugin = await plugins.loadForRun(input.storeId, input.pluginName);
      if (plugin.enabled) return { plugin };
      const body = d.fail("plugin_not_found", `Plugin ${plugin.name} is disabled in store ${plugin.storeId}`, { param: "pluginName" });
      await d.record({ ...NOTHING_RAN, outcome: "plugin_not_found", responseStatus: 404, responseBody: body }, { pluginVersion: plugin.version, verified: false });
      return { answer: { status: 404, body, deliveryId: d.id } };
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === "store_not_found") {
        // Not recorded: an unknown store has nobody to show it to, and recording would let anyone fill the log.
        return { answer: { status: 404, body: d.fail("store_not_found", err.message, { param: "storeId" }), deliveryId: null } };
      }
      if (err.code === "plugin_not_found") {
        const body = d.fail("plugin_not_found", err.message, { param: "pluginName" });
        await d.record({ ...NOTHING_RAN, outcome: "plugin_not_found", responseStatus: 404, responseBody: body }, { verified: false });
        return { answer: { status: 404, body, deliveryId: d.id } };
      }
      if (err.code === "secrets_unavailable") {
        // The operator's key is wrong, not the provider's delivery: keep it whole and ask for a retry.
        const body = d.fail("secrets_unavailable", "The plugin's secrets cannot be opened with this service's SECRETS_KEY; retry later", { deliveryId: d.id });
        await d.record({ ...NOTHING_RAN, outcome: "secrets_unavailable", responseStatus: 503, responseBody: body });
        return { answer: { status: 503, body, deliveryId: d.id, retryAfter: RETRY_AFTER_SECONDS } };
      }
      throw err;
    }
  }

  /** Step 2: the sandbox run; a replay's clock is its original delivery's receipt time (undefined: the real time). */
  function run(plugin: RunnablePlugin, req: { method: string; headers: Record<string, string>; query: Record<string, string>; body: Buffer }, clockMs: number | undefined) {
    return sandbox.run(
      {
        source: plugin.source,
        request: { method: req.method, body: req.body, headers: req.headers, query: req.query },
        store: { id: plugin.storeId },
        plugin: { name: plugin.name, version: plugin.version },
        secrets: plugin.secrets,
        ...(clockMs === undefined ? {} : { clockMs }),
      },
      // A plugin sees only its own store's invoices.
      { getInvoice: (id) => invoices.findView(plugin.storeId, id) },
    );
  }

  /** Step 3a: a run that failed (rejected, raised, timed out, returned nonsense): answered and recorded as such. */
  async function failed(d: Delivery, plugin: RunnablePlugin, error: NonNullable<RunTraces["error"]>, traces: RunTraces, redact: (t: string) => string): Promise<WebhookAnswer> {
    const map = RUN_ERROR_ANSWER[error.kind as keyof typeof RUN_ERROR_ANSWER];
    const message = error.kind === "busy"
      ? `The plugin did not run: ${error.message}; retry shortly`
      : map.showMessage
      ? `${map.code === "webhook_rejected" ? "Rejected by the plugin" : `Plugin failed (${error.kind})`}: ${error.message}`
      : map.code === "plugin_timeout"
        ? "The plugin did not finish within its time limit"
        : "The plugin was stopped";
    const body = d.fail(map.code, message, { deliveryId: d.id });
    await d.record(
      { outcome: map.outcome, result: null, error, logs: traces.logs, fetches: traces.fetches, invoiceId: null, transition: null, responseStatus: map.status, responseBody: body },
      { pluginVersion: plugin.version, redact, verified: map.outcome !== "rejected" },
    );
    return { status: map.status, body, deliveryId: d.id, ...(map.status === 503 ? { retryAfter: BUSY_RETRY_AFTER_SECONDS } : {}) };
  }

  /** Step 3b: `ignore` changes no status; its log lines still go on the invoice it names, if it is this store's. */
  async function ignored(d: Delivery, plugin: RunnablePlugin, result: PluginResult, traces: RunTraces, redact: (t: string) => string): Promise<WebhookAnswer> {
    const body = result.invoiceId === undefined ? { status: "ignore" } : { status: "ignore", invoiceId: result.invoiceId };
    const invoiceId = result.invoiceId ?? null;
    await db.transaction().execute(async (tx) => {
      let attached = false;
      if (invoiceId !== null && traces.logs.length > 0) {
        const own = await tx.selectFrom("invoices").select("id").where("id", "=", invoiceId).where("store_id", "=", d.input.storeId).executeTakeFirst();
        if (own) {
          await tx.insertInto("invoice_logs").values(traces.logs.map((l) => ({ invoice_id: invoiceId, log: l.description, type: l.type, created_at: d.receivedAt }))).execute();
          await refreshReadModel(tx, d.input.storeId, invoiceId);
          attached = true;
        }
      }
      await d.record(
        { outcome: "ignored", result, error: null, logs: traces.logs, fetches: traces.fetches, invoiceId: attached ? invoiceId : null, transition: null, responseStatus: 200, responseBody: body },
        { pluginVersion: plugin.version, redact, tx },
      );
    });
    return { status: 200, body, deliveryId: d.id };
  }

  /** Step 4: pushInvoice / disputeInvoice through the state machine, once per event, recorded in the same transaction. */
  async function apply(d: Delivery, plugin: RunnablePlugin, result: Extract<PluginResult, { status: "pushInvoice" | "disputeInvoice" }>, traces: RunTraces, redact: (t: string) => string): Promise<WebhookAnswer> {
    const action = result.status;
    const answerFor = (t: TransitionResult): { status: number; body: unknown; outcome: DeliveryOutcome; transition: string | null } => {
      const ok = { status: action, invoiceId: result.invoiceId };
      switch (t.kind) {
        case "changed":
          return { status: 200, body: ok, outcome: "applied", transition: `${t.from}->${t.to}` };
        case "already":
          return { status: 200, body: ok, outcome: "already_applied", transition: null };
        case "duplicate":
          return { status: 200, body: ok, outcome: "duplicate_event", transition: null };
        case "invalid":
          return {
            status: 409,
            body: d.fail("invalid_transition", `Invoice ${result.invoiceId} is ${t.status}; ${action} does not apply to it`, { invoiceId: result.invoiceId, currentStatus: t.status, deliveryId: d.id }),
            outcome: "invalid_transition",
            transition: null,
          };
        case "not_found":
          return {
            status: 404,
            body: d.fail("invoice_not_found", `No invoice ${result.invoiceId} in store ${d.input.storeId}`, { invoiceId: result.invoiceId, deliveryId: d.id }),
            outcome: "invoice_not_found",
            transition: null,
          };
      }
    };
    const transition = await applyPluginAction(
      db,
      {
        storeId: d.input.storeId,
        invoiceId: result.invoiceId,
        action,
        event: { pluginName: plugin.name, key: eventKeyOf(result, d.input.body), deliveryId: d.id },
        runLogs: traces.logs.map((l) => ({ log: l.description, type: l.type })),
        describe: (from, to) => ({
          log:
            action === "pushInvoice"
              ? `Payment confirmed by plugin ${plugin.name} v${plugin.version} (delivery ${d.id}): ${from} -> ${to}`
              : `Dispute opened, reported by plugin ${plugin.name} v${plugin.version} (delivery ${d.id}): ${from} -> ${to}`,
          type: action === "pushInvoice" ? "info" : "warning",
        }),
        record: async (tx, t) => {
          const a = answerFor(t);
          await d.record(
            { outcome: a.outcome, result, error: null, logs: traces.logs, fetches: traces.fetches, invoiceId: t.kind === "not_found" ? null : result.invoiceId, transition: a.transition, responseStatus: a.status, responseBody: a.body },
            { pluginVersion: plugin.version, redact, tx },
          );
        },
      },
      now,
    );
    const a = answerFor(transition);
    return { status: a.status, body: a.body, deliveryId: d.id };
  }

  async function handle(input: WebhookInput): Promise<WebhookAnswer> {
    const d = begin(input);
    const loaded = await load(d);
    if ("answer" in loaded) return loaded.answer;
    const { plugin } = loaded;
    const redact = createRedactor(plugin.secrets);
    const outcome = await run(plugin, input, input.receivedAt);
    const traces = scrubTraces(outcome, redact);
    if (!outcome.ok) return failed(d, plugin, traces.error!, traces, redact);
    const result = outcome.result;
    if (result.status === "ignore") return ignored(d, plugin, result, traces, redact);
    return apply(d, plugin, result, traces, redact);
  }

  return {
    handle,

    async replay(storeId, deliveryId, requestId) {
      const stored = await deliveries.getRequest(storeId, deliveryId);
      if (!stored) throw new AppError("delivery_not_found", `No delivery ${deliveryId} in store ${storeId}`, { param: "deliveryId" });
      if (stored.bodyBytes > stored.body.length) {
        throw new AppError("conflict", `Delivery ${deliveryId} was not verified, so only the first ${stored.body.length} of its ${stored.bodyBytes} bytes were kept; it cannot be replayed (the provider's own retry will arrive whole)`, { param: "deliveryId" });
      }
      // The script's clock reads the original receipt time, so timestamped signatures still verify.
      return handle({ storeId, pluginName: stored.pluginName, method: stored.method, headers: stored.headers, query: stored.query, body: stored.body, requestId, replayOf: deliveryId, receivedAt: stored.receivedAt });
    },

    async simulate(storeId, pluginName, input) {
      const stored = await plugins.loadForRun(storeId, pluginName, input.version);
      const plugin = input.source === undefined ? stored : { ...stored, source: input.source };
      const outcome = await run(plugin, { method: input.method ?? "POST", headers: lowerCaseKeys(input.headers ?? {}), query: input.query ?? {}, body: input.body }, input.receivedAt);
      const traces = scrubTraces(outcome, createRedactor(plugin.secrets));
      return {
        plugin: { name: plugin.name, version: plugin.version, enabled: plugin.enabled, unsaved: input.source !== undefined },
        result: outcome.ok ? outcome.result : null,
        error: traces.error,
        logs: traces.logs,
        fetches: traces.fetches,
        durationMs: outcome.durationMs,
      };
    },

    async pruneDeliveries() {
      const old = deps.retentionDays === 0 ? 0 : await deliveries.pruneOlderThan(now() - deps.retentionDays * 86_400_000);
      const over = deps.storeMaxBodyBytes ? await deliveries.pruneStoresOverBytes(deps.storeMaxBodyBytes) : 0;
      return old + over;
    },
  };
}

const NOTHING_RAN: Pick<RecordFields, "result" | "error" | "logs" | "fetches" | "invoiceId" | "transition"> = { result: null, error: null, logs: [], fetches: [], invoiceId: null, transition: null };

/** Nobody vouched for this delivery: the plugin rejected it, or there was no store or enabled plugin to ask. */
export function isUnverified(answer: WebhookAnswer): boolean {
  if (answer.status === 401) return true;
  const code = (answer.body as { error?: { code?: unknown } } | null)?.error?.code;
  return answer.status === 404 && (code === "store_not_found" || code === "plugin_not_found");
}

export function lowerCaseKeys(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}
