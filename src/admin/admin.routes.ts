// The admin API under /api/admin, behind ADMIN_TOKEN (or a console session, admin.auth.ts): stores,
// customers and checkout here; keys (api-keys.routes.ts) and each domain's admin routes mounted from their
// own modules. Thin adapters over the services.
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
import type { StoresService } from "../stores/stores.service.ts";
import { type PluginsRoutesDeps, pluginsAdminRoutes } from "../plugins/plugins.routes.ts";
import { type SimulationRoutesDeps, simulationAdminRoutes } from "../payments/simulation.routes.ts";
import { type InvoiceLifecycleRoutesDeps, invoiceLifecycleRoutes } from "../invoices/invoice-lifecycle.routes.ts";
import { type DeliveriesRoutesDeps, deliveriesRoutes } from "../payments/deliveries.routes.ts";
import { type EndpointsRoutesDeps, endpointsAdminRoutes } from "../events/endpoints.routes.ts";
import { type EventsAdminRoutesDeps, eventsAdminRoutes } from "../events/events-admin.routes.ts";
import { requireAdmin } from "./admin.auth.ts";
import { type ApiKeysRoutesDeps, apiKeysRoutes } from "./api-keys.routes.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const StoreSchema = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Type.String({ format: "date-time" }) });

/**
 * The admin token (or a console session) and the sign-in limit, the services behind the stores, keys,
 * customers and checkout routes, and what each mounted route module names.
 */
export interface AdminRoutesDeps
  extends ApiKeysRoutesDeps,
    PluginsRoutesDeps,
    SimulationRoutesDeps,
    InvoiceLifecycleRoutesDeps,
    DeliveriesRoutesDeps,
    EndpointsRoutesDeps,
    EventsAdminRoutesDeps {
  config: Pick<Config, "adminToken">;
  signIn: SignInGuard;
  console: ConsoleService;
  stores: StoresService;
  customers: Pick<CustomersService, "create">;
  invoices: Pick<InvoicesService, "checkout">;
}

const security = [{ adminToken: [] }];
const tags = ["admin"];

export function adminRoutes(deps: AdminRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    // Every route below, the mounted modules' too.
    app.addHook("onRequest", requireAdmin(deps.config.adminToken, deps.signIn, deps.console));
    // In this order: the OpenAPI document lists paths as they were registered.
    await app.register(storeRoutes(deps));
    await app.register(apiKeysRoutes(deps));
    await app.register(customerRoutes(deps));
    await app.register(checkoutRoutes(deps));
    await app.register(pluginsAdminRoutes(deps));
    await app.register(simulationAdminRoutes(deps));
    await app.register(invoiceLifecycleRoutes(deps));
    await app.register(deliveriesRoutes(deps));
    await app.register(endpointsAdminRoutes(deps));
    await app.register(eventsAdminRoutes(deps));
  };
}

/** Create a store; list them (a console login sees its own). */
function storeRoutes(deps: Pick<AdminRoutesDeps, "stores">): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}

/** Create a customer in a store. */
function customerRoutes(deps: Pick<AdminRoutesDeps, "customers">): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}

/** Checkout: a pending invoice for a store's customer. */
function checkoutRoutes(deps: Pick<AdminRoutesDeps, "invoices">): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}
