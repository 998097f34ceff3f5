// Events out for the admin API, the command line and the feed: endpoints (secret shown once, rotation
// with a 24 h overlap), their attempts, manual resend, the feed, and retention.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { type Cursor, isoTime } from "../lib/list-query.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { AddressPolicy } from "../platform/outbound/address-policy.ts";
import { type EndpointSender, endpointUrlProblem } from "./endpoint-target.ts";
import { type ExampleSent, sendExampleEvent } from "./endpoint-example.ts";
import { type EndpointSecretView, recoverFailed, revealSecret } from "./endpoint-tools.ts";
import { type AttemptWithDelivery, bringForward, type EndpointRow, type EndpointsRepository, resendPlan } from "./endpoints.repository.ts";
import { renderEvent } from "./event-render.ts";
import { queueDeliveries, type EventsRepository } from "./events.repository.ts";
import { CURRENT_API_VERSION, EVENT_TYPES, isEventType, type EventBody } from "./events.types.ts";
import type { Sequencer } from "./events.sequencer.ts";
import { generateSigningSecret } from "./webhook-signing.ts";
import { versionToRemember } from "../versioning/registry.ts";

export const ROTATION_OVERLAP_MS = 24 * 3_600_000;

export interface EndpointView {
  id: string;
  url: string;
  description: string;
  /** Empty: every type. */
  types: string[];
  enabled: boolean;
  disabledReason: string | null;
  apiVersion: string;
  createdAt: string;
  updatedAt: string;
}

export interface AttemptView {
  id: string;
  eventId: string;
  endpointId: string;
  deliveryId: string;
  attempt: number;
  outcome: string;
  responseStatus: number | null;
  error: string | null;
  responseExcerpt: string;
  responseHeaders: Record<string, string>;
  durationMs: number;
  createdAt: string;
  /** When the delivery this attempt belongs to is tried again: set on its latest attempt while it is still pending. */
  nextAttemptAt: string | null;
}

export interface EndpointInput {
  url: string;
  types?: string[];
  enabled?: boolean;
  description?: string;
  /** The API version its events are rendered in; default the current one. */
  version?: string;
}

/** The signing secrets of an endpoint, sealed at rest. */
export interface EndpointSecrets {
  current: string;
  previous?: string;
}

export interface EventsService {
  createEndpoint(storeId: string, input: EndpointInput): Promise<EndpointView & { secret: string }>;
  listEndpoints(storeId: string): Promise<EndpointView[]>;
  getEndpoint(storeId: string, id: string): Promise<EndpointView>;
  updateEndpoint(storeId: string, id: string, input: Partial<EndpointInput>): Promise<EndpointView>;
  removeEndpoint(storeId: string, id: string): Promise<void>;
  rotateSecret(storeId: string, id: string): Promise<{ id: string; secret: string; previousSecretExpiresAt: string }>;
  attempts(storeId: string, endpointId: string, options: { limit: number; cursor?: string; eventId?: string }): Promise<{ attempts: AttemptView[]; nextCursor: string | null }>;
  resend(storeId: string, eventId: string, endpointId?: string): Promise<{ eventId: string; deliveries: { id: string; endpointId: string }[] }>;
  feed(storeId: string, options: { cursor?: string; types?: string; limit: number }): Promise<{ events: EventBody[]; nextCursor: string }>;
  getEvent(storeId: string, eventId: string): Promise<EventBody>;
  /** The store's events newest first (admin API, console), narrowed by type and invoice. */
  listEvents(storeId: string, options: { limit: number; cursor?: string; types?: string; invoiceId?: string }): Promise<{ events: EventBody[]; nextCursor: string | null }>;
  pruneEvents(): Promise<number>;
  /** The endpoint's signing secret(s), for a merchant who lost it. */
  revealSecret(storeId: string, id: string): Promise<EndpointSecretView>;
  /** Queues again the events whose delivery to the endpoint failed since `since` (epoch ms). */
  recover(storeId: string, id: string, since: number): Promise<{ recovered: number; more: boolean }>;
  /** Sends an example event of `type` to the endpoint now, from this process, and returns its answer (not recorded). */
  sendExample(storeId: string, endpointId: string, type: string): Promise<ExampleSent>;
}

export interface EventsServiceDeps {
  db: Kysely<Database>;
  events: EventsRepository;
  endpoints: EndpointsRepository;
  box: SecretBox;
  policy: AddressPolicy;
  /** Sends example events (the dispatcher's sender: the same address checks). */
  sender: EndpointSender;
  /** Numbers committed events: a feed or listing read first numbers what committed before it. */
  sequencer: Sequencer;
  retentionDays: number;
  now: () => number;
}

export function openEndpointSecrets(box: SecretBox, sealed: string): EndpointSecrets {
  const opened = box.open(sealed);
  // The operator's key is wrong, not the request (serve refuses to start so; the command line does not check).
  if (opened === null || typeof opened.current !== "string") throw new AppError("secrets_unavailable", "The endpoint's signing secret cannot be opened with this SECRETS_KEY: run storefront secrets rekey");
  return opened.previous === undefined ? { current: opened.current } : { current: opened.current, previous: opened.previous };
}

const toEndpointView = (r: EndpointRow): EndpointView => ({
  id: r.id,
  url: r.url,
  description: r.description,
  types: r.types === "" ? [] : r.types.split(" "),
  enabled: r.enabled === 1,
  disabledReason: r.disabled_reason,
  apiVersion: r.api_version,
  createdAt: isoTime(r.created_at),
  updatedAt: isoTime(r.updated_at),
});

const toAttemptView = (r: AttemptWithDelivery): AttemptView => ({
  id: r.id,
  eventId: r.event_id,
  endpointId: r.endpoint_id,
  deliveryId: r.delivery_id,
  attempt: r.attempt,
  outcome: r.outcome,
  responseStatus: r.response_status,
  error: r.error,
  responseExcerpt: r.response_excerpt,
  responseHeaders: JSON.parse(r.response_headers) as Record<string, string>,
  durationMs: r.duration_ms,
  createdAt: isoTime(r.created_at),
  nextAttemptAt: r.delivery_status === "pending" && r.delivery_attempts === r.attempt && r.next_attempt_at !== null ? isoTime(r.next_attempt_at) : null,
});

export function encodeFeedCursor(seq: number): string {
  return Buffer.from(`e1:${seq}`).toString("base64url");
}

export function decodeFeedCursor(text: string): number | null {
  if (text.length > 64 || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const m = /^e1:(\d{1,15})$/.exec(Buffer.from(text, "base64url").toString("utf8"));
  return m ? Number(m[1]) : null;
}

/** The admin listing's cursor (newest first): the position to continue below. Not a feed cursor. */
function encodeListCursor(seq: number): string {
  return Buffer.from(`d1:${seq}`).toString("base64url");
}

function decodeListCursor(text: string): number | null {
  if (text.length > 64 || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const m = /^d1:(\d{1,15})$/.exec(Buffer.from(text, "base64url").toString("utf8"));
  return m ? Number(m[1]) : null;
}

function encodeAttemptCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString("base64url");
}

function decodeAttemptCursor(text: string): Cursor | null {
  try {
    const v: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === "string") return { createdAt: v[0] as number, id: v[1] };
  } catch {
    // not ours
  }
  return null;
}

function parseTypes(types: readonly string[], param: string): string {
  const unknown = types.filter((t) => !isEventType(t));
  if (unknown.length > 0) throw new AppError("invalid_request", `unknown event type ${unknown[0]}; known: ${EVENT_TYPES.join(", ")}`, { param });
  return [...new Set(types)].join(" ");
}

export function createEventsService(deps: EventsServiceDeps): EventsService {
  const { db, events, endpoints, box, policy, now } = deps;

  const checkUrl = (url: string) => {
    const problem = endpointUrlProblem(url, policy);
    if (problem !== null) throw new AppError("invalid_request", problem, { param: "url" });
  };

  async function requireEndpoint(storeId: string, id: string): Promise<EndpointRow> {
    const row = await endpoints.get(storeId, id);
    if (!row) throw new AppError("endpoint_not_found", `No endpoint ${id} in store ${storeId}`, { param: "endpointId" });
    return row;
  }

  async function requireStore(storeId: string): Promise<void> {
    const store = await db.selectFrom("stores").select("id").where("id", "=", storeId).executeTakeFirst();
    if (!store) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
  }

  return {
    async createEndpoint(storeId, input) {
      await requireStore(storeId);
      checkUrl(input.url);
      const secret = generateSigningSecret();
      const t = now();
      const row = {
        id: newId("ep"),
        store_id: storeId,
        url: input.url,
        description: input.description ?? "",
        types: parseTypes(input.types ?? [], "types"),
        enabled: input.enabled === false ? 0 : 1,
        disabled_reason: input.enabled === false ? "disabled by the merchant" : null,
        secrets: box.seal({ current: secret }),
        previous_secret_expires_at: null,
        api_version: versionToRemember(input.version),
        failing_since: null,
        last_success_at: null,
        created_at: t,
        updated_at: t,
      };
      await endpoints.insert(row);
      return { ...toEndpointView(row), secret };
    },

    async listEndpoints(storeId) {
      await requireStore(storeId);
      return (await endpoints.list(storeId)).map(toEndpointView);
    },

    async getEndpoint(storeId, id) {
      return toEndpointView(await requireEndpoint(storeId, id));
    },

    async updateEndpoint(storeId, id, input) {
      const current = await requireEndpoint(storeId, id);
      const t = now();
      const changes: Parameters<EndpointsRepository["update"]>[2] = { updated_at: t };
      if (input.url !== undefined) {
        checkUrl(input.url);
        changes.url = input.url;
      }
      if (input.types !== undefined) changes.types = parseTypes(input.types, "types");
      if (input.description !== undefined) changes.description = input.description;
      if (input.version !== undefined) changes.api_version = versionToRemember(input.version);
      if (input.enabled !== undefined && input.enabled !== (current.enabled === 1)) {
        changes.enabled = input.enabled ? 1 : 0;
        changes.disabled_reason = input.enabled ? null : "disabled by the merchant";
        // Re-enabled: the five days without success start again.
        if (input.enabled) changes.failing_since = null;
      }
      await endpoints.update(storeId, id, changes);
      if (input.enabled === false) await endpoints.cancelPending(id, t);
      return toEndpointView(await requireEndpoint(storeId, id));
    },

    async removeEndpoint(storeId, id) {
      if (!(await endpoints.remove(storeId, id, now()))) throw new AppError("endpoint_not_found", `No endpoint ${id} in store ${storeId}`, { param: "endpointId" });
    },

    async rotateSecret(storeId, id) {
      const row = await requireEndpoint(storeId, id);
      const old = openEndpointSecrets(box, row.secrets);
      const secret = generateSigningSecret();
      const expires = now() + ROTATION_OVERLAP_MS;
      await endpoints.update(storeId, id, { secrets: box.seal({ current: secret, previous: old.current }), previous_secret_expires_at: expires, updated_at: now() });
      return { id, secret, previousSecretExpiresAt: isoTime(expires) };
    },

    async attempts(storeId, endpointId, options) {
      await requireEndpoint(storeId, endpointId);
      let after: Cursor | null = null;
      if (options.cursor !== undefined) {
        after = decodeAttemptCursor(options.cursor);
        if (after === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
      }
      const { attempts, next } = await endpoints.attempts(storeId, endpointId, { limit: options.limit, after, ...(options.eventId ? { eventId: options.eventId } : {}) });
      return { attempts: attempts.map(toAttemptView), nextCursor: next === null ? null : encodeAttemptCursor(next) };
    },

    async resend(storeId, eventId, endpointId) {
      const event = await events.get(storeId, eventId);
      if (!event) throw new AppError("event_not_found", `No event ${eventId} in store ${storeId}`, { param: "eventId" });
      if (endpointId !== undefined) {
        const ep = await requireEndpoint(storeId, endpointId);
        if (ep.enabled !== 1) throw new AppError("conflict", `Endpoint ${endpointId} is disabled; enable it first`, { param: "endpointId" });
      }
      const at = now();
      const deliveries = await db.transaction().execute(async (tx) => {
        const target = { id: event.id, storeId, type: event.type };
        // A delivery of this event still pending for an endpoint (a retry scheduled, or not sent yet) is sent
        // now instead of queueing a second one: two deliveries would both be sent.
        const { targets, pending } = await resendPlan(tx, target, endpointId);
        await bringForward(tx, pending.filter((p) => p.claim_token === null).map((p) => p.id), at);
        const out = pending.map((p) => ({ id: p.id, endpointId: p.endpoint_id }));
        for (const id of targets.filter((t) => !pending.some((p) => p.endpoint_id === t))) out.push(...(await queueDeliveries(tx, target, at, { endpointId: id, anyType: true })));
        return out;
      });
      return { eventId, deliveries };
    },

    async feed(storeId, options) {
      let afterSeq = 0;
      if (options.cursor !== undefined) {
        const decoded = decodeFeedCursor(options.cursor);
        if (decoded === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
        afterSeq = decoded;
      }
      const types = options.types === undefined ? null : parseTypes(options.types.split(",").map((s) => s.trim()).filter((s) => s !== ""), "types").split(" ").filter((s) => s !== "");
      await deps.sequencer.catchUp(storeId);
      const rows = await events.feed(storeId, { afterSeq, types: types === null || types.length === 0 ? null : types, limit: options.limit });
      // The cursor is returned on an empty page too: polling with it never skips what commits later.
      const last = rows.length > 0 ? rows[rows.length - 1]!.seq! : afterSeq;
      return { events: rows.map((r) => renderEvent(r, CURRENT_API_VERSION)), nextCursor: encodeFeedCursor(last) };
    },

    async getEvent(storeId, eventId) {
      const event = await events.get(storeId, eventId);
      if (!event) throw new AppError("event_not_found", `No event ${eventId} in store ${storeId}`, { param: "eventId" });
      return renderEvent(event, CURRENT_API_VERSION);
    },

    async listEvents(storeId, options) {
      await requireStore(storeId);
      let beforeSeq: number | null = null;
      if (options.cursor !== undefined) {
        beforeSeq = decodeListCursor(options.cursor);
        if (beforeSeq === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
      }
      const types = options.types === undefined ? [] : parseTypes(options.types.split(",").map((s) => s.trim()).filter((s) => s !== ""), "types").split(" ").filter((s) => s !== "");
      await deps.sequencer.catchUp(storeId);
      const rows = await events.list(storeId, { beforeSeq, types: types.length === 0 ? null : types, invoiceId: options.invoiceId ?? null, limit: options.limit + 1 });
      const page = rows.slice(0, options.limit);
      const nextCursor = rows.length > options.limit ? encodeListCursor(page[page.length - 1]!.seq!) : null;
      return { events: page.map((r) => renderEvent(r, CURRENT_API_VERSION)), nextCursor };
    },

    async revealSecret(storeId, id) {
      return revealSecret(box, await requireEndpoint(storeId, id), now());
    },

    async recover(storeId, id, since) {
      return recoverFailed(db, await requireEndpoint(storeId, id), since, now());
    },

    async sendExample(storeId, endpointId, type) {
      if (!isEventType(type)) throw new AppError("invalid_request", `unknown event type ${type}; known: ${EVENT_TYPES.join(", ")}`, { param: "type" });
      const endpoint = await requireEndpoint(storeId, endpointId);
      return sendExampleEvent({ box, sender: deps.sender, openSecrets: (sealed) => openEndpointSecrets(box, sealed), now }, endpoint, type);
    },

    async pruneEvents() {
      if (deps.retentionDays === 0) return 0;
      return events.pruneOlderThan(now() - deps.retentionDays * 86_400_000);
    },
  };
}
