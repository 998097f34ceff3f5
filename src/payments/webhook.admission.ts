// What a webhook delivery passes before its plugin runs, and what it is charged afterwards:
// - the installation's source ranges (403 source_not_allowed from anywhere else, before any work);
// - the budgets, each charged to whoever spent it: per store the verified deliveries, per store and client
//   address the deliveries nobody verified. An address over its unverified budget is still heard when
//   there is a plugin to verify it: a provider's correctly signed delivery is never refused because of
//   forgeries from the same address (behind a proxy TRUST_PROXY does not name, every sender shares one);
//   a forgery from it is then answered 429 instead of 401. With no enabled plugin to ask, nothing can be
//   verified, and such an address is refused at once.
// - payments first: only a delivery whose body has arrived, for a store and plugin that exist, holds the
//   read API's finished pages back (src/readmodel/priority-gate.ts). A stranger's unfinished body, or a post to
//   a store that does not exist, holds nothing.
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError, errorBody } from "../errors.ts";
import { type AttemptLimiter, clientBucket } from "../lib/attempt-limiter.ts";
import type { PluginsService } from "../plugins/plugins.service.ts";
import type { PriorityGate } from "../readmodel/priority-gate.ts";
import { isUnverified, type WebhookAnswer } from "./webhook.service.ts";
import { inSourceRanges } from "../plugins/source-ranges.ts";

/** Call with the delivery's answer: returns the answer to send. */
export type SettleDelivery = (answer: WebhookAnswer, requestId: string) => WebhookAnswer;

const tooMany = (reply: FastifyReply, wait: number, message: string) => {
  reply.header("retry-after", String(wait));
  return new AppError("rate_limited", message);
};

/** What admission needs: the installation's source ranges and whether it runs, the budgets, the payments-first gate. */
export interface AdmissionDeps {
  plugins: Pick<PluginsService, "deliveryTarget">;
  limits: { webhookVerified: AttemptLimiter; webhookUnverified: AttemptLimiter };
  paymentsFirst: PriorityGate;
}

/** Throws the answer when the delivery may not be handled; else enters the payments-first gate (for a runnable plugin). */
export async function admitDelivery(deps: AdmissionDeps, request: FastifyRequest, reply: FastifyReply, storeId: string, pluginName: string): Promise<SettleDelivery> {
  const { limits } = deps;
  const target = await deps.plugins.deliveryTarget(storeId, pluginName);
  if (target.allowedSources !== null && !inSourceRanges(target.allowedSources, request.ip)) {
    throw new AppError("source_not_allowed", `Plugin ${pluginName} of store ${storeId} takes deliveries only from its provider's source ranges; ${request.ip} is not in them`);
  }
  const unverifiedKey = `${storeId}|${clientBucket(request.ip)}`;
  const unverifiedWait = limits.webhookUnverified.wait(unverifiedKey);
  if (unverifiedWait > 0 && !target.runnable) throw tooMany(reply, unverifiedWait, `Too many unverified deliveries for store ${storeId} from this address; retry in ${unverifiedWait} s`);
  const verifiedWait = limits.webhookVerified.wait(storeId);
  if (verifiedWait > 0) throw tooMany(reply, verifiedWait, `Too many deliveries for store ${storeId}; retry in ${verifiedWait} s`);
  // "close" comes once the answer is sent or the connection is gone, whichever way the request ends.
  if (target.runnable) reply.raw.once("close", deps.paymentsFirst.enter());

  return (answer, requestId) => {
    if (isUnverified(answer)) {
      limits.webhookUnverified.hit(unverifiedKey);
      if (unverifiedWait === 0) return answer;
      return {
        status: 429,
        body: errorBody("rate_limited", `Too many unverified deliveries for store ${storeId} from this address; retry in ${unverifiedWait} s`, requestId, { deliveryId: answer.deliveryId }),
        deliveryId: answer.deliveryId,
        retryAfter: unverifiedWait,
      };
    }
    // A 503 (queue full, secrets or database unavailable) ran nothing to verify: charged to nobody.
    if (answer.status !== 503) limits.webhookVerified.hit(storeId);
    return answer;
  };
}
