// The one place an event's wire form is made, for the feed and for webhooks. Versioning (CONTRACT §10)
// plugs in here: an endpoint's or request's api_version is passed along so older versions can be
// rendered from the stored current shape.
import { isoTime } from "../lib/list-query.ts";
import type { EventBody, StoredEvent } from "./events.types.ts";

export function renderEvent(event: Pick<StoredEvent, "id" | "type" | "data" | "createdAt">, _apiVersion: string): EventBody {
  return { id: event.id, type: event.type, createdAt: isoTime(event.createdAt), data: JSON.parse(event.data) as Record<string, unknown> };
}
