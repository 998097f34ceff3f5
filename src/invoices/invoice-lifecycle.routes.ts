// Admin API: cancel a pending invoice, refund a completed or disputed one (mounted inside the admin scope,
// behind ADMIN_TOKEN). Thin adapters over the invoice lifecycle service.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import { errorResponses } from "../schemas/common.schemas.ts";
import type { InvoiceLifecycleService } from "./invoice-lifecycle.service.ts";

const Params = Type.Object({ storeId: Type.String(), invoiceId: Type.String() });
const Body = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 500, description: "Added to the invoice's log line.", examples: ["Customer asked to cancel"] })) },
  { additionalProperties: false },
);
/** The body is optional: a bare POST (no body, no content type) is validated as `{}`. */
const emptyBodyIsEmptyObject = async (request: FastifyRequest) => {
  request.body ??= {};
};

export interface InvoiceLifecycleRoutesDeps {
  invoiceLifecycle: InvoiceLifecycleService;
}

export function invoiceLifecycleRoutes(deps: InvoiceLifecycleRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const security = [{ adminToken: [] }];
    const tags = ["admin"];

    app.post(
      "/stores/:storeId/invoices/:invoiceId/cancel",
      {
        preValidation: emptyBodyIsEmptyObject,
        schema: {
          tags,
          security,
          summary: "Cancel a pending invoice",
          description: "pending → cancelled, logged on the invoice. Any other status (including already cancelled) answers 409 invalid_transition with currentStatus.",
          params: Params,
          body: Body,
          response: { 200: Type.Ref("Invoice"), ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request) =>
        deps.invoiceLifecycle.cancel(request.params.storeId, request.params.invoiceId, {
          actor: "admin API",
          ...(request.body.reason !== undefined ? { reason: request.body.reason } : {}),
        }),
    );

    app.post(
      "/stores/:storeId/invoices/:invoiceId/refund",
      {
        preValidation: emptyBodyIsEmptyObject,
        schema: {
          tags,
          security,
          summary: "Mark a completed or disputed invoice refunded",
          description:
            "completed or disputed → refunded, logged on the invoice. Records the refund made at the payment provider; it moves no money. " +
            "Any other status (including already refunded) answers 409 invalid_transition with currentStatus.",
          params: Params,
          body: Body,
          response: { 200: Type.Ref("Invoice"), ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request) =>
        deps.invoiceLifecycle.refund(request.params.storeId, request.params.invoiceId, {
          actor: "admin API",
          ...(request.body.reason !== undefined ? { reason: request.body.reason } : {}),
        }),
    );
  };
}
