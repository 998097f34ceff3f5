// What a merchant does to one endpoint beyond editing it, as Svix's App Portal offers: reveal its signing
// secret, and recover the events whose delivery to it failed since a time (queued again, as a resend
// would). Sending it an example event now is endpoint-example.ts.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { isoTime } from "../lib/list-query.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { EndpointRow } from "./endpoints.repository.ts";
import { queueDeliveries } from "./events.repository.ts";

/** Events recovered in one request at most: a larger backlog takes a few requests (each says how many are left). */
const RECOVER_BATCH = 500;

export interface EndpointSecretView {
  id: string;
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: string | null;
}

/** The signing secrets still valid: the current one, and the previous one during its 24 hours. */
export function validSecrets(box: SecretBox, row: EndpointRow, now: number): { current: string; previous: string | null } {
  const opened = box.open(row.secrets);
  if (opened === null || typeof opened.current !== "string") throw new Error("an endpoint's signing secret cannot be opened with SECRETS_KEY");
  const stillValid = typeof opened.previous === "string" && row.previous_secret_expires_at !== null && Number(row.previous_secret_expires_at) > now;
  return { current: opened.current, previous: stillValid ? (opened.previous ?? null) : null };
}

export function revealSecret(box: SecretBox, row: EndpointRow, now: number): EndpointSecretView {
  const { current, previous } = validSecrets(box, row, now);
  return { id: row.id, secret: current, previousSecret: previous, previousSecretExpiresAt: previous === null ? null : isoTime(Number(row.previous_secret_expires_at)) };
}

/** Queues again every event whose delivery to the endpoint failed (or was cancelled) since `since`, and has not succeeded since. */
export async function recoverFailed(db: Kysely<Database>, row: EndpointRow, since: number, now: number): Promise<{ recovered: number; more: boolean }> {
  if (row.enabled !== 1) throw new AppError("conflict", `Endpoint ${row.id} is disabled; enable it first`, { param: "endpointId" });
  return db.transaction().execute(async (tx) => {
    const failed = await tx
      .selectFrom("event_deliveries as d")
      .innerJoin("events as e", "e.id", "d.event_id")
      .select(["e.id", "e.type"])
      .distinct()
      .where("d.endpoint_id", "=", row.id)
      .where("d.status", "in", ["failed", "cancelled"])
      .where("d.created_at", ">=", since)
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom("event_deliveries as o").select("o.id").whereRef("o.event_id", "=", "d.event_id").where("o.endpoint_id", "=", row.id).where("o.status", "in", ["succeeded", "pending"]))),
      )
      .orderBy("e.id")
      .limit(RECOVER_BATCH + 1)
      .execute();
    for (const event of failed.slice(0, RECOVER_BATCH)) await queueDeliveries(tx, { id: event.id, storeId: row.store_id, type: event.type }, now, { endpointId: row.id, anyType: true });
    return { recovered: Math.min(failed.length, RECOVER_BATCH), more: failed.length > RECOVER_BATCH };
  });
}
