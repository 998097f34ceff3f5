// A payment webhook from arrival to answer: load the store's plugin, run it in the sandbox, apply its
// result through the invoice state machine, record the delivery, and decide the HTTP status. Also replay
// (a stored delivery through the current version) and simulation (a dry run that changes nothing).
// Secrets never leave: every string recorded or answered is scrubbed of the plugin's secret values.
import { performance } from "node:perf_hooks";
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { AppError, type ErrorCode, errorBody } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { applyPluginAction, type TransitionResult } from "../invoices/invoice-transitions.ts";
import type { InvoicesRepository } from "../invoices/invoices.repository.ts";
import type { FetchRecord, LogLine, RunOutcome, Sandbox } from "../sandbox/index.ts";
import type { DeliveriesRepository, DeliveryOutcome, DeliveryRecord } from "./deliveries.repository.ts";
import type { PluginsService, RunnablePlugin } from "./plugins.service.ts";

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
}

export interface WebhookAnswer {
  status: number;
  body: unknown;
  deliveryId: string | null;
}

export interface SimulationInput {
  body: Buffer;
  headers?: Record<string, string>;
  query?: Record<string, string>;
  method?: string;
  version?: number;
}

export interface SimulationResult {
  plugin: { name: string; version: number; enabled: boolean };
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

function scrubOutcome(outcome: RunOutcome, redact: (t: string) => string): RunOutcome {
  const logs = outcome.logs.map((l) => ({ ...l, description: redact(l.description) }));
  const fetches = outcome.fetches.map((f) => ({ ...f, url: redact(f.url), error: f.error === null ? null : redact(f.error) }));
  if (outcome.ok) {
    const result = JSON.parse(redact(JSON.stringify(outcome.result))) as typeof outcome.result;
    return { ...outcome, result, logs, fetches };
  }
  return { ...outcome, error: { ...outcome.error, message: redact(outcome.error.message) }, logs, fetches };
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

export function createWebhookService(deps: WebhookDeps): WebhookService {
  const { db, plugins, invoices, deliveries, sandbox, now } = deps;

  function runPlugin(plugin: RunnablePlugin, req: { method: string; headers: Record<string, string>; query: Record<string, string>; body: Buffer }) {
    return sandbox.run(
      {
        source: plugin.source,
        request: { method: req.method, body: req.body, headers: req.headers, query: req.query },
        store: { id: plugin.storeId },
        plugin: { name: plugin.name, version: plugin.version },
        secrets: plugin.secrets,
      },
      // A plugin sees only its own store's invoices.
      { getInvoice: (id) => invoices.findView(plugin.storeId, id) },
    );
  }

  async function handle(input: WebhookInput): Promise<WebhookAnswer> {
    const deliveryId = newId("dlv");
    const receivedAt = now();
    const started = performance.now();
    const base = {
      id: deliveryId,
      storeId: input.storeId,
      pluginName: input.pluginName,
      replayOf: input.replayOf ?? null,
      method: input.method,
      headers: input.headers,
      query: input.query,
      body: input.body,
      createdAt: receivedAt,
    };
    const fail = (code: ErrorCode, message: string, extra: Record<string, unknown> = {}) => ({ body: errorBody(code, message, input.requestId, extra) });

    let plugin: RunnablePlugin;
    try {
      plugin = await plugins.loadForRun(input.storeId, input.pluginName);
    } catch (err) {
      if (err instanceof AppError && err.code === "store_not_found") {
        // Not recorded: an unknown store has nobody to show it to, and recording would let anyone fill the log.
        return { status: 404, body: fail("store_not_found", err.message, { param: "storeId" }).body, deliveryId: null };
      }
      if (err instanceof AppError && err.code === "plugin_not_found") {
        const answer = fail("plugin_not_found", err.message, { param: "pluginName" });
        await deliveries.insert({ ...base, pluginVersion: null, outcome: "plugin_not_found", result: null, error: null, logs: [], fetches: [], invoiceId: null, transition: null, durationMs: performance.now() - started, responseStatus: 404, responseBody: answer.body });
        return { status: 404, body: answer.body, deliveryId };
      }
      throw err;
    }
    const record = (fields: Pick<DeliveryRecord, "outcome" | "result" | "error" | "logs" | "fetches" | "invoiceId" | "transition" | "responseStatus" | "responseBody">, tx?: Transaction<Database>) =>
      deliveries.insert({ ...base, pluginVersion: plugin.version, durationMs: performance.now() - started, ...fields }, tx);

    if (!plugin.enabled) {
      const answer = fail("plugin_not_found", `Plugin ${plugin.name} is disabled in store ${plugin.storeId}`, { param: "pluginName" });
      await record({ outcome: "plugin_not_found", result: null, error: null, logs: [], fetches: [], invoiceId: null, transition: null, responseStatus: 404, responseBody: answer.body });
      return { status: 404, body: answer.body, deliveryId };
    }

    const redact = createRedactor(plugin.secrets);
    const outcome = scrubOutcome(await runPlugin(plugin, input), redact);
    const { logs, fetches } = outcome;

    if (!outcome.ok) {
      const map = RUN_ERROR_ANSWER[outcome.error.kind];
      const message = map.showMessage
        ? `${map.code === "webhook_rejected" ? "Rejected by the plugin" : `Plugin failed (${outcome.error.kind})`}: ${outcome.error.message}`
        : map.code === "plugin_timeout"
          ? "The plugin did not finish within its time limit"
          : "The plugin was stopped";
      const answer = fail(map.code, message, { deliveryId });
      await record({ outcome: map.outcome, result: null, error: outcome.error, logs, fetches, invoiceId: null, transition: null, responseStatus: map.status, responseBody: answer.body });
      return { status: map.status, body: answer.body, deliveryId };
    }

    const result = outcome.result;
    const runLogs = logs.map((l) => ({ log: l.description, type: l.type }));
    if (result.status === "ignore") {
      const body = result.invoiceId === undefined ? { status: "ignore" } : { status: "ignore", invoiceId: result.invoiceId };
      const invoiceId = result.invoiceId ?? null;
      await db.transaction().execute(async (tx) => {
        // An ignored delivery about one of this store's invoices still leaves its log lines there (e.g. "underpaid").
        let attached = false;
        if (invoiceId !== null && runLogs.length > 0) {
          const own = await tx.selectFrom("invoices").select("id").where("id", "=", invoiceId).where("store_id", "=", input.storeId).executeTakeFirst();
          if (own) {
            await tx.insertInto("invoice_logs").values(runLogs.map((l) => ({ invoice_id: invoiceId, log: l.log, type: l.type, created_at: receivedAt }))).execute();
            attached = true;
          }
        }
        await record({ outcome: "ignored", result, error: null, logs, fetches, invoiceId: attached ? invoiceId : null, transition: null, responseStatus: 200, responseBody: body }, tx);
      });
      return { status: 200, body, deliveryId };
    }

    const action = result.status;
    const answerFor = (t: TransitionResult): { status: number; body: unknown; outcome: DeliveryOutcome; transition: string | null } => {
      switch (t.kind) {
        case "changed":
          return { status: 200, body: { status: action, invoiceId: result.invoiceId }, outcome: "applied", transition: `${t.from}->${t.to}` };
        case "already":
          return { status: 200, body: { status: action, invoiceId: result.invoiceId }, outcome: "already_applied", transition: null };
        case "invalid":
          return {
            status: 409,
            body: fail("invalid_transition", `Invoice ${result.invoiceId} is ${t.status}; ${action} does not apply to it`, { invoiceId: result.invoiceId, currentStatus: t.status, deliveryId }).body,
            outcome: "invalid_transition",
            transition: null,
          };
        case "not_found":
          return {
            status: 404,
            body: fail("invoice_not_found", `No invoice ${result.invoiceId} in store ${input.storeId}`, { invoiceId: result.invoiceId, deliveryId }).body,
            outcome: "invoice_not_found",
            transition: null,
          };
      }
    };
    const transition = await applyPluginAction(
      db,
      {
        storeId: input.storeId,
        invoiceId: result.invoiceId,
        action,
        runLogs,
        describe: (from, to) => ({
          log:
            action === "pushInvoice"
              ? `Payment confirmed by plugin ${plugin.name} v${plugin.version} (delivery ${deliveryId}): ${from} -> ${to}`
              : `Dispute opened, reported by plugin ${plugin.name} v${plugin.version} (delivery ${deliveryId}): ${from} -> ${to}`,
          type: action === "pushInvoice" ? "info" : "warning",
        }),
        record: async (tx, t) => {
          const a = answerFor(t);
          await record({ outcome: a.outcome, result, error: null, logs, fetches, invoiceId: t.kind === "not_found" ? null : result.invoiceId, transition: a.transition, responseStatus: a.status, responseBody: a.body }, tx);
        },
      },
      now,
    );
    const a = answerFor(transition);
    return { status: a.status, body: a.body, deliveryId };
  }

  return {
    handle,

    async replay(storeId, deliveryId, requestId) {
      const stored = await deliveries.getRequest(storeId, deliveryId);
      if (!stored) throw new AppError("delivery_not_found", `No delivery ${deliveryId} in store ${storeId}`, { param: "deliveryId" });
      return handle({ storeId, pluginName: stored.pluginName, method: stored.method, headers: stored.headers, query: stored.query, body: stored.body, requestId, replayOf: deliveryId });
    },

    async simulate(storeId, pluginName, input) {
      const plugin = await plugins.loadForRun(storeId, pluginName, input.version);
      const redact = createRedactor(plugin.secrets);
      const outcome = scrubOutcome(
        await runPlugin(plugin, { method: input.method ?? "POST", headers: lowerCaseKeys(input.headers ?? {}), query: input.query ?? {}, body: input.body }),
        redact,
      );
      return {
        plugin: { name: plugin.name, version: plugin.version, enabled: plugin.enabled },
        result: outcome.ok ? outcome.result : null,
        error: outcome.ok ? null : outcome.error,
        logs: outcome.logs,
        fetches: outcome.fetches,
        durationMs: outcome.durationMs,
      };
    },

    async pruneDeliveries() {
      if (deps.retentionDays === 0) return 0;
      return deliveries.pruneOlderThan(now() - deps.retentionDays * 86_400_000);
    },
  };
}

export function lowerCaseKeys(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}
