// Admin API for a store's API keys (mounted inside the admin scope, behind ADMIN_TOKEN): create one (the
// key is shown only then), list them (never the keys), change the API version one is answered in, revoke one.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import { SCOPES, type StoresService } from "../stores/stores.service.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
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
const CreateKeyBody = Type.Object(
  {
    scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1 })),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    version: Type.Optional(KeyVersionInput),
  },
  { additionalProperties: false },
);
const CreatedKeySchema = Type.Object({ id: Type.String(), key: Type.String(), scopes: Type.Array(ScopeSchema), version: KeyVersionSchema });

export interface ApiKeysRoutesDeps {
  stores: StoresService;
}

const security = [{ adminToken: [] }];
const tags = ["admin"];

export function apiKeysRoutes(deps: ApiKeysRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      "/stores/:storeId/keys",
      {
        schema: {
          tags,
          security,
          summary: "Create an API key (the key is shown only in this response)",
          params: StoreParams,
          body: Type.Optional(CreateKeyBody),
          response: { 201: CreatedKeySchema, ...errorResponses(400, 401, 404) },
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
  };
}
