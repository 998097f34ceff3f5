// The host calls of a running plugin (getInvoice, fetch), performed on the main thread while the worker
// waits parked on Atomics.wait, and the answer handed back to it. Only plain data crosses: the invoice
// as JSON text, the fetch as status, headers and bytes; a fetch counts against the run's limit, is
// recorded for the delivery log, and ends when the run does.
import { CTL_HOST, type FetchReply, type FetchRequest, type HostCall, type InvoiceReply } from "../sandbox.protocol.ts";
import type { LookupFunction, SandboxLimits } from "../sandbox.types.ts";
import { createFetcher, type Fetcher } from "./fetch.client.ts";
import type { Active } from "./jobs.ts";
import type { Slot } from "./worker-slot.ts";

export class HostCalls {
  private readonly limits: Readonly<SandboxLimits>;
  private readonly fetcher: Fetcher;

  constructor(limits: Readonly<SandboxLimits>, lookup?: LookupFunction) {
    this.limits = limits;
    this.fetcher = createFetcher(limits, lookup);
  }

  /** Performs `call` for the job; a failure is an answer too (the script sees it as an error). */
  async perform(job: Active, call: HostCall): Promise<FetchReply | InvoiceReply> {
    try {
      return call.op === "invoice" ? await this.invoice(job, call.id) : await this.fetch(job, call.request);
    } catch (err) {
      return { ok: false, error: `host call failed: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  close(): Promise<void> {
    return this.fetcher.close();
  }

  private async invoice(active: Active, id: string): Promise<InvoiceReply> {
    const host = active.pending.host;
    if (!host) return { ok: false, error: "no invoice lookup is available" };
    try {
      const invoice = await host.getInvoice(id);
      // Only JSON text crosses into Lua: no host object (or prototype) is ever reachable from a script.
      const json = invoice === null || invoice === undefined ? undefined : (JSON.stringify(invoice) as string | undefined);
      return { ok: true, json: typeof json === "string" && json.startsWith("{") ? json : null };
    } catch {
      return { ok: false, error: "the invoice lookup failed" };
    }
  }

  private async fetch(active: Active, request: FetchRequest): Promise<FetchReply> {
    if (active.fetchCount >= this.limits.maxFetches) {
      const error = `fetch refused: the limit of ${this.limits.maxFetches} fetches per run is reached`;
      active.fetches.push({ url: request.url.slice(0, 2048), method: request.method.toUpperCase().slice(0, 16), status: null, error, durationMs: 0, requestBytes: request.body?.byteLength ?? 0, responseBytes: 0 });
      return { ok: false, error };
    }
    active.fetchCount++;
    active.abort ??= new AbortController();
    const { reply, record } = await this.fetcher.fetch(request, { signal: active.abort.signal, deadline: active.startedAt + this.limits.wallMs });
    active.fetches.push(record);
    return reply;
  }
}

/** Hands the answer of a host call to the slot's parked worker and wakes it. */
export function answer(slot: Slot, runId: number, reply: FetchReply | InvoiceReply): void {
  slot.replyPort.postMessage({ runId, reply });
  Atomics.store(slot.ctl, CTL_HOST, 1);
  Atomics.notify(slot.ctl, CTL_HOST);
}
