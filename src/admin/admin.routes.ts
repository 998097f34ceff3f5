// The admin API under /api/admin: stores, keys, customers and checkout. Thin adapters over the deps.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { CreateCustomerBodySchema } from "../schemas/customers.schemas.ts";
import { CheckoutBodySchema } from "../schemas/invoices.schemas.ts";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import type { Config } from "../config.ts";
import type { SignInGuard } from "../auth/sign-in-guard.ts";
import type { ConsoleService } from "../console/console.service.ts";
import type { CustomersService } from "../customers/customers.service.ts";
import type { InvoicesService } from "../invoices/invoices.service.ts";
import { SCOPES, type StoresService } from "../stores/stores.service.ts";
import { type PluginsRoutesDeps, pluginsAdminRoutes } from "../plugins/plugins.routes.ts";
import { type SimulationRoutesDeps, simulationAdminRoutes } from "../payments/simulation.routes.ts";
import { type InvoiceLifecycleRoutesDeps, invoiceLifecycleRoutes } from "../invoices/invoice-lifecycle.routes.ts";
import { type DeliveriesRoutesDeps, deliveriesRoutes } from "../payments/deliveries.routes.ts";
import { type EndpointsRoutesDeps, endpointsAdminRoutes } from "../events/endpoints.routes.ts";
import { requireAdmin } from "./admin.auth.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const StoreSchema = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Type.String({ format: "date-time" }) });
const ScopeSchema = Type.String({ enum: [...SCOPES] });
const KEY_VERSION = "API version (YYYY-MM-DD) the key is answered in unless a request pins another; one of the versions the service serves.";
const KeyVersionSchema = Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$", description: KEY_VERSION, examples: ["2026-11-23"] });
// Input without a pattern: a version the service does not serve is answered 400 unknown_version naming those it does.
const KeyVersionInput = Type.String({ minLength: 1, maxLength: 100, description: KEY_VERSION, examples: ["2026-11-23"] });
const KeyInfoSchema = Type.Object({
  id: Type.String(),
  name: Nullable(Type.String()),
  prefix: Type.String(),
  scopes: Type.Array(ScopeSchema),
  createdAt: Type.String(),
  revokedAt: Nullable(Type.String()),
  version: KeyVersionSchema,
});

/**
 * The admin token (or a console session) and the sign-in limit, the services behind the stores, keys,
 * customers and checkout routes, and what each mounted route module names.
 */
export interface AdminRoutesDeps extends PluginsRoutesDeps, SimulationRoutesDeps, InvoiceLifecycleRoutesDeps, DeliveriesRoutesDeps, EndpointsRoutesDeps {
  config: Pick<Config, "adminToken">;
  signIn: SignInGuard;
  console: ConsoleService;
  stores: StoresService;
  customers: Pick<CustomersService, "create">;
  invoices: Pick<InvoicesService, "checkout">;
}

export function adminRoutes(deps: AdminRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addHook("onRequest", requireAdmin(deps.config.adminToken, deps.signIn, deps.console));
    const security = [{ adminToken: [] }];
    const tags = ["admin"];

    app.post(
      "/stores",
      {
        schema: {
          tags,
          security,
          summary: "Create a store",
          body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
          response: { 201: StoreSchema, ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => reply.code(201).send(await deps.stores.createStore(request.body.name)),
    );

    app.get(
      "/stores",
      { schema: { tags, security, summary: "List stores", response: { 200: Type.Object({ data: Type.Array(StoreSchema) }) } } },
      async (request) => {
        const stores = await deps.stores.listStores();
        // A console login sees only its own stores.
        const allowed = request.consoleSession?.stores ?? null;
        return { data: allowed === null ? stores : stores.filter((s) => allowed.includes(s.id)) };
      },
    );

    app.post(
      "/stores/:storeId/keys",
      {
        schema: {
          tags,
          security,
          summary: "Create an API key (the key is shown only in this response)",
          params: StoreParams,
          body: Type.Optional(
            Type.Object(
              {
                scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1 })),
                name: Type.Optional(Type.String({ maxLength: 200 })),
                version: Type.Optional(KeyVersionInput),
              },
              { additionalProperties: false },
            ),
          ),
          response: {
            201: Type.Object({ id: Type.String(), key: Type.String(), scopes: Type.Array(ScopeSchema), version: KeyVersionSchema }),
            ...errorResponses(400, 401, 404),
          },
        },
      },
      async (request, reply) => {
        const body = request.body ?? {};
        const created = await deps.stores.createKey(request.params.storeId, {
          ...(body.scopes ? { scopes: body.scopes } : {}),
          ...(body.name ? { name: body.name } : {}),
          ...(body.version ? { version: body.version } : {}),
        });
        return reply.code(201).send(created);
      },
    );

    app.get(
      "/stores/:storeId/keys",
      {
        schema: {
          tags,
          security,
          summary: "List a store's API keys (never the keys themselves)",
          params: StoreParams,
          response: {
            200: Type.Object({ data: Type.Array(KeyInfoSchema) }),
            ...errorResponses(401, 404),
          },
        },
      },
      async (request) => ({ data: await deps.stores.listKeys(request.params.storeId) }),
    );

    app.patch(
      "/stores/:storeId/keys/:keyId",
      {
        schema: {
          tags,
          security,
          summary: "Change the API version a key is answered in",
          params: Type.Object({ storeId: Type.String(), keyId: Type.String() }),
          body: Type.Object({ version: KeyVersionInput }, { additionalProperties: false }),
          response: { 200: KeyInfoSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => deps.stores.setKeyVersion(request.params.storeId, request.params.keyId, request.body.version),
    );

    app.delete(
      "/stores/:storeId/keys/:keyId",
      {
        schema: {
          tags,
          security,
          summary: "Revoke an API key",
          params: Type.Object({ storeId: Type.String(), keyId: Type.String() }),
          response: { 204: Type.Null(), ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        await deps.stores.revokeKey(request.params.storeId, request.params.keyId);
        return reply.code(204).send(null);
      },
    );

    app.post(
      "/stores/:storeId/customers",
      {
        schema: {
          tags,
          security,
          summary: "Create a customer",
          params: StoreParams,
          body: CreateCustomerBodySchema,
          response: {
            201: Type.Object({
              id: Type.String(),
              email: Type.String(),
              createdAt: Type.String(),
              storeCustomerDiscordAccount: Nullable(Type.Object({ discordId: Type.String(), email: Type.String() })),
            }),
            ...errorResponses(400, 401, 404),
          },
        },
      },
      async (request, reply) => reply.code(201).send(await deps.customers.create(request.params.storeId, request.body)),
    );

    app.post(
      "/stores/:storeId/invoices",
      {
        schema: {
          tags,
          security,
          summary: "Checkout: create a pending invoice",
          description: "totalInUsd is the sum of price × quantity over the items.",
          params: StoreParams,
          body: CheckoutBodySchema,
          response: { 201: Type.Ref("Invoice"), ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) => reply.code(201).send(await deps.invoices.checkout(request.params.storeId, request.body)),
    );

    await app.register(pluginsAdminRoutes(deps));
    await app.register(simulationAdminRoutes(deps));
    await app.register(invoiceLifecycleRoutes(deps));
    await app.register(deliveriesRoutes(deps));
    await app.register(endpointsAdminRoutes(deps));
  };
}
