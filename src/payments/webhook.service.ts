// A payment webhook from arrival to answer, read top to bottom as its steps: load the store's plugin,
// run it in the sandbox, decide what its outcome means, apply the decision in one durable transaction,
// and record the delivery (with the decision, in that transaction). Also replay (a stored delivery through
// the current version, on the original clock) and simulation (a dry run that changes nothing).
//
// The plugin's decision is applied exactly as it returned it. Secret values are scrubbed only from what is
// recorded or shown (redaction.ts), never from the decision itself. The payment's transaction holds the
// money path only (the claim, the change, its lines, its event, the record); the read model follows after
// the commit (src/readmodel/projector.ts), and the event is numbered after it (events.sequencer.ts).
import { performance } from "node:perf_hooks";
import type { Kysely, Transaction } from "kysely";
import type { DurableCommitter } from "../platform/db/durable.ts";
import type { Database } from "../platform/db/schema.ts";
import { AppError, type ErrorCode, errorBody } from "../errors.ts";
import type { InvoicesRepository } from "../readmodel/invoice-documents.ts";
import { newTimedId } from "../lib/ids.ts";
import { storableText } from "../lib/input-guard.ts";
import type { PluginsService, RunnablePlugin } from "../plugins/plugins.service.ts";
import type { FetchRecord, LogLine, Sandbox } from "../sandbox/index.ts";
import type { DeliveriesRepository, DeliveryOutcome } from "./deliveries.repository.ts";
import { type Applied, applyPayment, attachRunLines, RetryPayment } from "./payment.apply.ts";
import type { PaymentStatements } from "./payment.postgres.ts";
import { type Decision, decide } from "./payment.decide.ts";
import { DEFAULT_UNVERIFIED_BODY_BYTES, type DeliveryContext, deliveryRecord, eventOfBody, NOTHING_RAN, type RecordFields, type RecordOptions, recordDelivery } from "./payment.record.ts";
import { createRedactor, type Redact, type RunTraces, scrubTraces } from "./redaction.ts";
import { simulationRequest } from "./simulation.request.ts";

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
  /** Run this recorded delivery's request (read here: any size) instead of body, headers and query. */
  deliveryId?: string;
  /** Sign the request as the plugin's catalogue provider does, with the store's own settings. */
  sign?: boolean;
}

export interface SimulationResult {
  /** `unsaved`: the run was of the given source, not of `version` (which it is based on). */
  plugin: { name: string; version: number; enabled: boolean; unsaved: boolean };
  result: unknown;
  error: { kind: string; message: string; line?: number } | null;
  logs: LogLine[];
  fetches: FetchRecord[];
  durationMs: number;
  /** The request as run: its headers (signed when asked) and clock. */
  request: { headers: Record<string, string>; receivedAt: string; signed: boolean };
}

export interface WebhookService {
  handle(input: WebhookInput): Promise<WebhookAnswer>;
  replay(storeId: string, deliveryId: string, requestId: string): Promise<WebhookAnswer>;
  simulate(storeId: string, pluginName: string, input: SimulationInput): Promise<SimulationResult>;
  pruneDeliveries(): Promise<number>;
}

export interface WebhookDeps {
  db: Kysely<Database>;
  /** Payments commit through it: on disk before they are answered, sharing commits where they can. */
  committer: DurableCommitter;
  /** PostgreSQL: sends the reads, and the writes, of payments ready together as one statement (payment.postgres.ts). */
  paymentStatements?: PaymentStatements;
  plugins: PluginsService;
  invoices: InvoicesRepository;
  deliveries: DeliveriesRepository;
  sandbox: Sandbox;
  retentionDays: number;
  /** Bodies of deliveries nobody verified (unknown or disabled plugin, rejected) are kept up to this many bytes. */
  unverifiedBodyBytes?: number;
  /** Per store, the delivery log keeps at most this many bytes of bodies (oldest go first); 0 = no cap. */
  storeMaxBodyBytes?: number;
  /** Called after a payment's transaction committed (the projector and the sequencer look sooner). */
  onCommitted?: () => void;
  now: () => number;
}

/** Seconds a provider is asked to wait when the service cannot take a delivery now. */
const RETRY_AFTER_SECONDS = 30;
/** ... and when the store's sandbox queue is full: it drains in seconds. */
const BUSY_RETRY_AFTER_SECONDS = 5;
/** Transactions run for one payment at most while other actions keep changing its invoice. */
const MAX_ATTEMPTS = 5;

/** The run's log() lines as the invoice's log keeps them. */
const runLines = (traces: RunTraces) => traces.logs.map((l) => ({ log: storableText(l.description), type: l.type }));

/** The answer to a provider and the delivery log's outcome for what applying did. */
function answerFor(d: DeliveryContext, decision: Extract<Decision, { kind: "apply" }>, applied: Applied, redact: Redact): { status: number; body: unknown; outcome: DeliveryOutcome; transition: string | null } {
  // The invoice id is the plugin's: shown scrubbed of secrets (the decision applied keeps it as returned).
  const invoiceId = redact(decision.invoiceId);
  const ok = { status: decision.action, invoiceId };
  const fail = (code: ErrorCode, message: string, extra: Record<string, unknown>) => errorBody(code, message, d.input.requestId, { ...extra, deliveryId: d.id });
  switch (applied.kind) {
    case "changed":
      return { status: 200, body: ok, outcome: "applied", transition: `${applied.from}->${applied.to}` };
    case "already":
      return { status: 200, body: ok, outcome: "already_applied", transition: null };
    case "duplicate":
      return { status: 200, body: ok, outcome: "duplicate_event", transition: null };
    case "invalid":
      return {
        status: 409,
        body: fail("invalid_transition", `Invoice ${invoiceId} is ${applied.status}; ${decision.action} does not apply to it`, { invoiceId, currentStatus: applied.status }),
        outcome: "invalid_transition",
        transition: null,
      };
    case "not_found":
      return {
        status: 404,
        body: fail("invoice_not_found", `No invoice ${invoiceId} in store ${d.input.storeId}`, { invoiceId }),
        outcome: "invoice_not_found",
        transition: null,
      };
  }
}

export function createWebhookService(deps: WebhookDeps): WebhookService {
  const { db, committer, plugins, invoices, deliveries, sandbox, now } = deps;
  const unverifiedBodyBytes = deps.unverifiedBodyBytes ?? DEFAULT_UNVERIFIED_BODY_BYTES;
  const fail = (d: DeliveryContext, code: ErrorCode, message: string, extra: Record<string, unknown> = {}) => errorBody(code, message, d.input.requestId, extra);
  const record = (d: DeliveryContext, fields: RecordFields, options: Omit<RecordOptions, "unverifiedBodyBytes"> = {}) =>
    recordDelivery(db, deliveries, deliveryRecord(d, fields, { ...options, unverifiedBodyBytes }));

  /** Step 1: the store's plugin with its secrets, or the answer when there is none to run. */
  async function load(d: DeliveryContext): Promise<{ plugin: RunnablePlugin } | { answer: WebhookAnswer }> {
    const { input } = d;
    const refused = async (status: number, code: "plugin_not_found" | "secrets_unavailable", message: string, extra: Record<string, unknown>, options: Omit<RecordOptions, "unverifiedBodyBytes">) => {
      const body = fail(d, code, message, extra);
      await record(d, { ...NOTHING_RAN, outcome: code, responseStatus: status, responseBody: body }, options);
      return { answer: { status, body, deliveryId: d.id, ...(status === 503 ? { retryAfter: RETRY_AFTER_SECONDS } : {}) } };
    };
    try {
      const plugin = await plugins.loadForRun(input.storeId, input.pluginName);
      if (plugin.enabled) return { plugin };
      return refused(404, "plugin_not_found", `Plugin ${plugin.name} is disabled in store ${plugin.storeId}`, { param: "pluginName" }, { pluginVersion: plugin.version, verified: false });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // Not recorded: an unknown store has nobody to show it to, and recording would let anyone fill the log.
      if (err.code === "store_not_found") return { answer: { status: 404, body: fail(d, "store_not_found", err.message, { param: "storeId" }), deliveryId: null } };
      if (err.code === "plugin_not_found") return refused(404, "plugin_not_found", err.message, { param: "pluginName" }, { verified: false });
      // The operator's key is wrong, not the provider's delivery: kept whole, and a retry asked for.
      if (err.code === "secrets_unavailable") return refused(503, "secrets_unavailable", "The plugin's secrets cannot be opened with this service's SECRETS_KEY; retry later", { deliveryId: d.id }, {});
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

  /** Step 4a: a run that failed: answered and recorded as such. */
  async function failed(d: DeliveryContext, plugin: RunnablePlugin, decision: Extract<Decision, { kind: "failed" }>, traces: RunTraces, redact: Redact): Promise<WebhookAnswer> {
    const body = fail(d, decision.code, decision.message, { deliveryId: d.id });
    await record(
      d,
      { outcome: decision.outcome, result: null, error: traces.error, logs: traces.logs, fetches: traces.fetches, invoiceId: null, transition: null, responseStatus: decision.status, responseBody: body },
      { pluginVersion: plugin.version, redact, verified: decision.verified },
    );
    return { status: decision.status, body, deliveryId: d.id, ...(decision.status === 503 ? { retryAfter: BUSY_RETRY_AFTER_SECONDS } : {}) };
  }

  /** Step 4b: `ignore` changes no status; its log lines still go on the invoice it names, if it is this store's. */
  async function ignored(d: DeliveryContext, plugin: RunnablePlugin, decision: Extract<Decision, { kind: "ignore" }>, traces: RunTraces, redact: Redact): Promise<WebhookAnswer> {
    const { invoiceId, result } = decision;
    const body = invoiceId === null ? { status: "ignore" } : { status: "ignore", invoiceId: redact(invoiceId) };
    const fields = (attached: boolean): RecordFields => ({ outcome: "ignored", result, error: null, logs: traces.logs, fetches: traces.fetches, invoiceId: attached ? invoiceId : null, transition: null, responseStatus: 200, responseBody: body });
    const options = { pluginVersion: plugin.version, redact, unverifiedBodyBytes };
    if (invoiceId === null || traces.logs.length === 0) await deliveries.insert(deliveryRecord(d, fields(false), options));
    else {
      const lines = runLines(traces);
      await db.transaction().execute(async (tx) => {
        const attached = await attachRunLines(tx, d.input.storeId, invoiceId, lines, d.receivedAt);
        await deliveries.insert(deliveryRecord(d, fields(attached), options), tx);
      });
      deps.onCommitted?.();
    }
    return { status: 200, body, deliveryId: d.id };
  }

  /** Step 4c: pushInvoice / disputeInvoice applied once per event, recorded in the same durable transaction. */
  async function applied(d: DeliveryContext, plugin: RunnablePlugin, decision: Extract<Decision, { kind: "apply" }>, traces: RunTraces, redact: Redact): Promise<WebhookAnswer> {
    const payment = {
      storeId: d.input.storeId,
      pluginName: plugin.name,
      pluginVersion: plugin.version,
      deliveryId: d.id,
      invoiceId: decision.invoiceId,
      action: decision.action,
      eventKey: decision.eventKey,
      runLines: runLines(traces),
    };
    const work = async (tx: Kysely<Database> | Transaction<Database>) => {
      // The record is written with the change, so it is made from the answer the outcome gets.
      let a: ReturnType<typeof answerFor> | undefined;
      const outcome = await applyPayment(tx, payment, now, (applied) => {
        a = answerFor(d, decision, applied, redact);
        const fields: RecordFields = { outcome: a.outcome, result: decision.result, error: null, logs: traces.logs, fetches: traces.fetches, invoiceId: applied.kind === "not_found" ? null : decision.invoiceId, transition: a.transition, responseStatus: a.status, responseBody: a.body };
        return deliveryRecord(d, fields, { pluginVersion: plugin.version, redact, unverifiedBodyBytes });
      }, deps.paymentStatements);
      return a ?? answerFor(d, decision, outcome, redact);
    };
    let answer: Awaited<ReturnType<typeof work>>;
    for (let attempt = 1; ; attempt++) {
      try {
        answer = await committer.runAtomic(work);
        break;
      } catch (err) {
        // Another action changed the invoice between its read and the compare-and-set: rolled back, run again.
        if (!(err instanceof RetryPayment) || attempt >= MAX_ATTEMPTS) throw err;
      }
    }
    deps.onCommitted?.();
    return { status: answer.status, body: answer.body, deliveryId: d.id };
  }

  async function handle(input: WebhookInput): Promise<WebhookAnswer> {
    const d: DeliveryContext = { id: newTimedId("dlv"), input, receivedAt: now(), startedAt: performance.now() };
    const loaded = await load(d);
    if ("answer" in loaded) return loaded.answer;
    const { plugin } = loaded;
    const redact = createRedactor(plugin.secrets);
    const outcome = await run(plugin, input, input.receivedAt);
    // Read before any transaction opens: the payment's transaction holds only the payment.
    d.bodyEvent = eventOfBody(input.body);
    const traces = scrubTraces(outcome, redact);
    const decision = decide(outcome, traces.error, input.body);
    switch (decision.kind) {
      case "failed":
        return failed(d, plugin, decision, traces, redact);
      case "ignore":
        return ignored(d, plugin, decision, traces, redact);
      case "apply":
        return applied(d, plugin, decision, traces, redact);
    }
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
      const request = await simulationRequest({ deliveries, plugins, now }, plugin, input);
      const outcome = await run(plugin, request, request.clockMs);
      const traces = scrubTraces(outcome, createRedactor(plugin.secrets));
      return {
        plugin: { name: plugin.name, version: plugin.version, enabled: plugin.enabled, unsaved: input.source !== undefined },
        result: outcome.ok ? outcome.result : null,
        error: traces.error,
        logs: traces.logs,
        fetches: traces.fetches,
        durationMs: outcome.durationMs,
        request: { headers: request.headers, receivedAt: new Date(request.clockMs ?? now()).toISOString(), signed: request.signed },
      };
    },

    async pruneDeliveries() {
      const old = deps.retentionDays === 0 ? 0 : await deliveries.pruneOlderThan(now() - deps.retentionDays * 86_400_000);
      const over = deps.storeMaxBodyBytes ? await deliveries.pruneStoresOverBytes(deps.storeMaxBodyBytes) : 0;
      return old + over;
    },
  };
}

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
