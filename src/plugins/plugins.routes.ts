// Admin API for plugins: the catalogue, installations, versions, secrets (mounted inside the admin scope,
// behind ADMIN_TOKEN), one registrar per resource. Dry runs and replays are the payment path's:
// payments/simulation.routes.ts.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import type { Sandbox } from "../sandbox/index.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { listCatalog, listCatalogFixtures } from "./catalog.ts";
import { MAX_SECRET_BYTES, MAX_SOURCE_BYTES, MAX_VERSION, type PluginsService, SECRET_NAME } from "./plugins.service.ts";
import { MAX_SOURCE_RANGES } from "./source-ranges.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const PluginParams = Type.Object({ storeId: Type.String(), name: Type.String() });
const PluginInfo = Type.Object({
  name: Type.String(),
  version: Type.Integer(),
  enabled: Type.Boolean(),
  secretNames: Type.Array(Type.String(), { description: "Names only: secret values are never shown." }),
  allowedSources: Nullable(Type.Array(Type.String(), { description: "The provider's source ranges deliveries must come from; null: from anywhere." })),
  catalog: Nullable(Type.String()),
  catalogBase: Nullable(Type.String({ description: "The catalogue plugin it was installed from, also after its source was edited: that plugin's declared settings apply." })),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
const DeclaredSetting = Type.Object({ name: Type.String(), required: Type.Boolean(), description: Type.String(), default: Type.Optional(Type.String()) });
const SecretsBody = Type.Record(Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]{0,63}$" }), Type.String({ maxLength: 8192 }));
const Installed = Type.Object({
  name: Type.String(),
  version: Type.Integer(),
  enabled: Type.Boolean(),
  reused: Type.Boolean({ description: "The source was an earlier version's, which is current again: no new version was made." }),
});
/**
 * Secret name → value; a null value deletes that secret. One schema with two types rather than a union:
 * the validator coerces inside a union (null became "" in its string branch, so a null never deleted).
 */
const SecretsInput = Type.Unsafe<Record<string, string | null>>({
  type: "object",
  propertyNames: { pattern: SECRET_NAME.source },
  additionalProperties: { type: ["string", "null"], maxLength: MAX_SECRET_BYTES },
  description: "Names are Lua identifiers of at most 64 characters (letters, digits and _, not starting with a digit): a plugin reads `secrets.name`.",
  examples: [{ signingSecret: "whsec_…" }],
});
/** One schema with two types, like SecretsInput: inside a union the validator's coercion would rewrite null. */
const AllowedSourcesInput = Type.Unsafe<string[] | null>({
  type: ["array", "null"],
  items: { type: "string", minLength: 1, maxLength: 64 },
  maxItems: MAX_SOURCE_RANGES,
  description:
    "The provider's published source ranges (IP addresses or CIDRs): a delivery from any other client address is answered 403 source_not_allowed before any work. " +
    "null removes the restriction; omitted, it stays as it is. The client address is the socket's peer unless TRUST_PROXY names the proxies in front (docs/operations.md).",
  examples: [["54.187.174.169/32", "54.187.205.235/32"]],
});

/** What the plugin admin routes need: the store check, the sandbox's compile check, and the plugins service. */
export interface PluginsRoutesDeps {
  stores: StoresService;
  sandbox: Sandbox;
  plugins: PluginsService;
}

const DiffQuery = Type.Object({ from: Type.Optional(Type.Integer({ minimum: 1 })), to: Type.Optional(Type.Integer({ minimum: 1 })) }, { additionalProperties: false });
const PluginDiff = Type.Object({
  name: Type.String(),
  from: Type.Object({ version: Type.Integer(), sha256: Type.String() }),
  to: Type.Object({ version: Type.Integer(), sha256: Type.String() }),
  identical: Type.Boolean(),
  added: Type.Integer({ description: "Lines only in `to`." }),
  removed: Type.Integer({ description: "Lines only in `from`." }),
  diff: Type.String(),
});

const security = [{ adminToken: [] }];
const tags = ["plugins"];

export function pluginsAdminRoutes(deps: PluginsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    // In this order: the OpenAPI document lists paths as they were registered.
    await app.register(catalogueRoutes());
    await app.register(installRoutes(deps));
    await app.register(secretsRoutes(deps));
    await app.register(installationRoutes(deps));
    await app.register(versionRoutes(deps));
  };
}

/** The reference plugins that install by name, and their sample requests. */
function catalogueRoutes(): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/catalog",
      {
        schema: {
          tags,
          security,
          summary: "Reference plugins that install by name",
          description: "Each with the settings it reads (`secrets`: the required ones must be given at install), and whether the console's bench can sign a request for it with a store's own secret.",
          response: { 200: Type.Object({ data: Type.Array(Type.Object({ name: Type.String(), summary: Type.String(), secrets: Type.Array(DeclaredSetting), signable: Type.Boolean() })) }) },
        },
      },
      async () => ({ data: listCatalog() }),
    );

    app.get(
      "/catalog/:name/fixtures",
      {
        schema: {
          tags,
          security,
          summary: "A reference plugin's sample requests (its fixtures for `storefront plugins test`)",
          description: "Each with the request as sent (the body as text, or base64 when it is not UTF-8), the clock it was recorded at, and what the plugin is expected to answer. The fixtures' secrets are not shown: a store's own secrets differ.",
          params: Type.Object({ name: Type.String() }),
          response: {
            200: Type.Object({
              data: Type.Array(
                Type.Object({
                  name: Type.String(),
                  description: Nullable(Type.String()),
                  request: Type.Object({
                    method: Type.String(),
                    headers: Type.Record(Type.String(), Type.String()),
                    query: Type.Record(Type.String(), Type.String()),
                    body: Type.String(),
                    bodyBase64: Nullable(Type.String()),
                  }),
                  receivedAt: Nullable(Type.String({ format: "date-time" })),
                  expect: Type.Unknown(),
                }),
              ),
            }),
            ...errorResponses(401, 404),
          },
        },
      },
      async (request) => {
        const fixtures = listCatalogFixtures(request.params.name);
        if (fixtures === null) throw new AppError("not_found", `No catalogue plugin ${request.params.name}`, { param: "name" });
        return { data: fixtures };
      },
    );
  };
}

/** Changing what runs: the editor's compile check, and installing (or updating) a plugin's source. */
function installRoutes(deps: Pick<PluginsRoutesDeps, "stores" | "sandbox" | "plugins">): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      "/stores/:storeId/plugins/check",
      {
        schema: {
          tags,
          security,
          summary: "Compile Lua source without running or saving it",
          description: "The editor's check as you type: `errors` lists the compile error with its line (Lua stops at the first). Nothing is stored.",
          params: StoreParams,
          body: Type.Object({ source: Type.String({ maxLength: MAX_SOURCE_BYTES }) }, { additionalProperties: false }),
          response: {
            200: Type.Object({
              ok: Type.Boolean(),
              errors: Type.Array(Type.Object({ line: Nullable(Type.Integer()), message: Type.String() })),
            }),
            ...errorResponses(400, 401, 404),
          },
        },
      },
      async (request) => {
        await deps.stores.requireStore(request.params.storeId);
        const check = await deps.sandbox.check(request.body.source);
        return check.ok ? { ok: true, errors: [] } : { ok: false, errors: [{ line: check.line, message: check.message }] };
      },
    );

    app.put(
      "/stores/:storeId/plugins/:name",
      {
        schema: {
          tags,
          security,
          summary: "Install or update a plugin (new source is a new version)",
          description:
            "Give `source` (Lua) or `catalog` (a reference plugin's name). `secrets` are merged into the stored ones; a null value deletes one; a catalogue plugin's required settings must be there (400 naming the missing ones). Source that does not compile is refused with 422 and its line. With `baseVersion` (the version the source was edited from) a save is refused with 409 `version_conflict` when another version is current meanwhile (`currentVersion` in the error).",
          params: PluginParams,
          body: Type.Object(
            {
              source: Type.Optional(Type.String({ minLength: 1 })),
              catalog: Type.Optional(Type.String({ minLength: 1 })),
              secrets: Type.Optional(SecretsInput),
              enabled: Type.Optional(Type.Boolean()),
              allowedSources: Type.Optional(AllowedSourcesInput),
              baseVersion: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_VERSION, description: "The version this source was edited from; another version current now is a 409 version_conflict." })),
              note: Type.Optional(Type.String({ maxLength: 500, description: "Why this version was saved, kept with it." })),
            },
            { additionalProperties: false },
          ),
          response: { 200: Installed, 201: Installed, ...errorResponses(400, 401, 404, 409, 422) },
        },
      },
      async (request, reply) => {
        const { created, ...info } = await deps.plugins.install(request.params.storeId, request.params.name, request.body);
        return reply.code(created ? 201 : 200).send(info);
      },
    );
  };
}

/** A plugin's settings (secrets), replaced without touching its code. */
function secretsRoutes(deps: Pick<PluginsRoutesDeps, "plugins">): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.put(
      "/stores/:storeId/plugins/:name/secrets",
      {
        schema: {
          tags,
          security,
          summary: "Replace a plugin's settings (secrets); its code and version are untouched",
          description:
            "The settings become exactly `secrets` (encrypted at rest, never shown again), plus the stored ones named in `keep` (a form that cannot show stored values leaves them as they are). A catalogue plugin's required settings must be there: 400 naming the missing ones.",
          params: PluginParams,
          body: Type.Object(
            { secrets: SecretsBody, keep: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 100, description: "Stored settings to keep as they are." })) },
            { additionalProperties: false },
          ),
          response: { 200: PluginInfo, ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request) => deps.plugins.replaceSecrets(request.params.storeId, request.params.name, request.body.secrets, request.body.keep),
    );
  };
}

/** A store's installations: list, read one with its current source, remove one. */
function installationRoutes(deps: Pick<PluginsRoutesDeps, "plugins">): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/stores/:storeId/plugins",
      { schema: { tags, security, summary: "List a store's plugins", params: StoreParams, response: { 200: Type.Object({ data: Type.Array(PluginInfo) }), ...errorResponses(401, 404) } } },
      async (request) => ({ data: await deps.plugins.list(request.params.storeId) }),
    );

    app.get(
      "/stores/:storeId/plugins/:name",
      {
        schema: { tags, security, summary: "A plugin with its current source", params: PluginParams, response: { 200: Type.Intersect([PluginInfo, Type.Object({ source: Type.String() })]), ...errorResponses(401, 404) } },
      },
      async (request) => deps.plugins.get(request.params.storeId, request.params.name),
    );

    app.delete(
      "/stores/:storeId/plugins/:name",
      {
        schema: {
          tags,
          security,
          summary: "Remove a plugin installation",
          description: "Removes the installation with all its versions and secrets; its webhooks then answer 404 plugin_not_found. Its deliveries stay in the log. Installing the name again starts at version 1.",
          params: PluginParams,
          response: { 204: Type.Null({ description: "Removed." }), ...errorResponses(401, 404) },
        },
      },
      async (request, reply) => {
        await deps.plugins.remove(request.params.storeId, request.params.name);
        return reply.code(204).send(null);
      },
    );
  };
}

/** A plugin's versions: list them, read one's source, make one current again, diff two. */
function versionRoutes(deps: Pick<PluginsRoutesDeps, "plugins">): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/stores/:storeId/plugins/:name/versions",
      {
        schema: {
          tags,
          security,
          summary: "A plugin's versions, newest first",
          params: PluginParams,
          response: {
            200: Type.Object({ data: Type.Array(Type.Object({ version: Type.Integer(), sha256: Type.String(), catalog: Nullable(Type.String()), note: Nullable(Type.String()), createdAt: Type.String(), current: Type.Boolean() })) }),
            ...errorResponses(401, 404),
          },
        },
      },
      async (request) => ({ data: await deps.plugins.versions(request.params.storeId, request.params.name) }),
    );

    app.get(
      "/stores/:storeId/plugins/:name/versions/:version",
      {
        schema: {
          tags,
          security,
          summary: "The source of one version",
          params: Type.Object({ storeId: Type.String(), name: Type.String(), version: Type.Integer({ minimum: 1, maximum: MAX_VERSION }) }),
          response: { 200: Type.Object({ version: Type.Integer(), source: Type.String() }), ...errorResponses(401, 404) },
        },
      },
      async (request) => ({ version: request.params.version, source: await deps.plugins.versionSource(request.params.storeId, request.params.name, request.params.version) }),
    );

    app.post(
      "/stores/:storeId/plugins/:name/rollback",
      {
        schema: {
          tags,
          security,
          summary: "Make an earlier version current again",
          description: "No new version is made: webhooks run version `version` from now on, and later versions stay readable (roll forward the same way).",
          params: PluginParams,
          body: Type.Object({ version: Type.Integer({ minimum: 1, examples: [1] }) }, { additionalProperties: false }),
          response: { 200: PluginInfo, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => deps.plugins.rollback(request.params.storeId, request.params.name, request.body.version),
    );

    app.get(
      "/stores/:storeId/plugins/:name/diff",
      {
        schema: {
          tags,
          security,
          summary: "Differences between two versions' sources",
          description: "`diff` is a unified diff (`diff -u`) of the two sources. `to` defaults to the current version, `from` to the version before `to`.",
          params: PluginParams,
          querystring: DiffQuery,
          response: { 200: PluginDiff, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) =>
        deps.plugins.diff(request.params.storeId, request.params.name, {
          ...(request.query.from === undefined ? {} : { from: request.query.from }),
          ...(request.query.to === undefined ? {} : { to: request.query.to }),
        }),
    );
  };
}
