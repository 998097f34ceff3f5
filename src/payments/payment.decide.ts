// Step 3 of a payment: what a plugin run's outcome means, decided once, as a value. A run that failed is
// answered with its error; `ignore` changes no status; pushInvoice / disputeInvoice is an action to apply
// to an invoice, once per provider event (known by the result's eventId, else by the raw body's SHA-256).
import { createHash } from "node:crypto";
import type { ErrorCode } from "../errors.ts";
import type { PluginAction } from "../invoices/invoice-state.ts";
import type { PluginResult, RunOutcome } from "../sandbox/index.ts";
import type { DeliveryOutcome } from "./deliveries.repository.ts";

type RunError = Exclude<RunOutcome, { ok: true }>["error"];

export type Decision =
  | { kind: "failed"; status: number; code: ErrorCode; outcome: DeliveryOutcome; message: string; verified: boolean }
  | { kind: "ignore"; result: PluginResult; invoiceId: string | null }
  | { kind: "apply"; result: PluginResult; action: PluginAction; invoiceId: string; eventKey: string };

const FAILED: Record<RunError["kind"], { status: number; code: ErrorCode; outcome: DeliveryOutcome; show: boolean }> = {
  rejected: { status: 401, code: "webhook_rejected", outcome: "rejected", show: true },
  timeout: { status: 504, code: "plugin_timeout", outcome: "plugin_timeout", show: false },
  busy: { status: 503, code: "service_unavailable", outcome: "plugin_busy", show: true },
  script_error: { status: 500, code: "plugin_error", outcome: "plugin_error", show: true },
  invalid_result: { status: 500, code: "plugin_error", outcome: "plugin_error", show: true },
  memory_limit: { status: 500, code: "plugin_error", outcome: "plugin_error", show: true },
  killed: { status: 500, code: "plugin_error", outcome: "plugin_error", show: false },
};

/**
 * An applied event is known by the plugin's eventId, else by the SHA-256 of the raw body. An eventId with a
 * NUL byte (which PostgreSQL text cannot hold) is known by its bytes in hex instead: still one key per id.
 */
export function eventKeyOf(result: PluginResult, body: Buffer): string {
  if (result.eventId === undefined) return `sha256:${createHash("sha256").update(body).digest("hex")}`;
  return result.eventId.includes("\u0000") ? `idx:${Buffer.from(result.eventId, "utf8").toString("hex")}` : `id:${result.eventId}`;
}

/** `error` is the run's error as recorded (scrubbed of secrets): its message may be shown. */
export function decide(outcome: RunOutcome, error: { kind: string; message: string } | null, body: Buffer): Decision {
  if (!outcome.ok) {
    const kind = outcome.error.kind;
    const f = FAILED[kind];
    const shown = error?.message ?? "";
    const message =
      kind === "busy"
        ? `The plugin did not run: ${shown}; retry shortly`
        : f.show
          ? `${f.code === "webhook_rejected" ? "Rejected by the plugin" : `Plugin failed (${kind})`}: ${shown}`
          : f.code === "plugin_timeout"
            ? "The plugin did not finish within its time limit"
            : "The plugin was stopped";
    // Nobody vouched for a rejected delivery: its body is kept only in part.
    return { kind: "failed", status: f.status, code: f.code, outcome: f.outcome, message, verified: f.outcome !== "rejected" };
  }
  const result = outcome.result;
  if (result.status === "ignore") return { kind: "ignore", result, invoiceId: result.invoiceId ?? null };
  return { kind: "apply", result, action: result.status, invoiceId: result.invoiceId, eventKey: eventKeyOf(result, body) };
}
