// The one place an event's wire form is made, for the feed and for webhooks. Versioning (README, "API versions")
// plugs in here: an endpoint's or request's api_version is passed along so older versions can be
// rendered from the stored current shape.
import { isoTime } from "../lib/list-query.ts";
import { currentVersion, renderEventForVersion, versionForStored } from "../versioning/registry.ts";
import type { EventBody, StoredEvent } from "./events.types.ts";

type Renderable = Pick<StoredEvent, "id" | "type" | "data" | "createdAt">;

export function renderEvent(event: Renderable, apiVersion: string): EventBody {
  const body: EventBody = { id: event.id, type: event.type, createdAt: isoTime(event.createdAt), data: JSON.parse(event.data) as Record<string, unknown> };
  return renderEventForVersion(apiVersion, body as unknown as Parameters<typeof renderEventForVersion>[1]) as unknown as EventBody;
}

/**
 * The JSON text a webhook sends: JSON.stringify(renderEvent(…)). In the current version the stored data is
 * already the wire shape, so it is spliced in rather than parsed and encoded again for every delivery.
 */
export function renderEventJson(event: Renderable, apiVersion: string): string {
  if (versionForStored(apiVersion).version !== currentVersion().version) return JSON.stringify(renderEvent(event, apiVersion));
  return `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},"createdAt":"${isoTime(event.createdAt)}","data":${event.data}}`;
}
