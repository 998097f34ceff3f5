// "Send an example" to an endpoint now (Svix's button, the Stripe CLI's trigger): an example event of the
// chosen type (src/events/event-examples.ts) with a fresh id and the current time, rendered in the
// endpoint's API version and signed with its secrets exactly as the dispatcher signs real events, sent at
// once by the process that asks, through the same guarded sender. It is not an event of the store: not in
// the feed, not retried, not recorded as an attempt; the answer is returned to whoever asked.
import { newId } from "../lib/ids.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { versionForStored } from "../versioning/registry.ts";
import type { EndpointSender } from "./endpoint-target.ts";
import type { EndpointRow } from "./endpoints.repository.ts";
import { exampleEvent } from "./event-examples.ts";
import { renderEventJson } from "./event-render.ts";
import type { EventType } from "./events.types.ts";
import { signingSecrets, webhookHeaders } from "./webhook-signing.ts";

export interface ExampleSent {
  endpointId: string;
  eventId: string;
  type: EventType;
  /** The endpoint answered 2xx. */
  ok: boolean;
  responseStatus: number | null;
  /** Why no answer came (timeout, refused connection, an address ENDPOINT_ALLOW does not list). */
  error: string | null;
  /** The receiver's answer: its headers and the first KiB of its body. */
  responseHeaders: Record<string, string>;
  responseExcerpt: string;
  durationMs: number;
}

export interface ExampleDeps {
  box: SecretBox;
  sender: EndpointSender;
  openSecrets: (sealed: string) => { current: string; previous?: string };
  now: () => number;
}

export async function sendExampleEvent(deps: ExampleDeps, endpoint: EndpointRow, type: EventType): Promise<ExampleSent> {
  const example = exampleEvent(type);
  const event = { id: newId("evt"), type, createdAt: deps.now(), data: JSON.stringify(example.data) };
  const body = renderEventJson(event, endpoint.api_version);
  const secrets = signingSecrets(deps.openSecrets(endpoint.secrets), endpoint.previous_secret_expires_at, deps.now());
  const headers = { ...webhookHeaders(secrets, event.id, Math.floor(Date.now() / 1000), body), "storefront-version": versionForStored(endpoint.api_version).version };
  const result = await deps.sender.send(endpoint.url, headers, body);
  const ok = result.ok && result.status >= 200 && result.status < 300;
  return {
    endpointId: endpoint.id,
    eventId: event.id,
    type,
    ok,
    responseStatus: result.ok ? result.status : null,
    error: result.ok ? null : result.error,
    responseHeaders: result.ok ? result.headers : {},
    responseExcerpt: result.ok ? result.excerpt : "",
    durationMs: result.durationMs,
  };
}
