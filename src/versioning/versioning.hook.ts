// The one place where versions meet HTTP: a request's version comes from its `storefront-version` header,
// else from its API key, else it is the current one; every response says which version it is in, carries
// `Deprecation`/`Sunset` when that version is deprecated, and is reshaped when that version differs.
// Responses in the current version are passed through untouched: no parse, no second serialization.
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from "fastify";
import { errorBody } from "../errors.ts";
import { errorResponses } from "../schemas/common.schemas.ts";
import {
  type ApiVersion,
  currentVersion,
  findVersion,
  renderResponseForVersion,
  routeKey,
  unknownVersionError,
  versionForStored,
} from "./registry.ts";

export const VERSION_HEADER = "storefront-version";

declare module "fastify" {
  interface FastifyRequest {
    /** The version this request is answered in. */
    apiVersion: ApiVersion | null;
    /** Whether the request chose its version with the header (then the key's version does not apply). */
    apiVersionPinned: boolean;
  }
}

/** Called by the API key hook: a key's remembered version applies unless the request pinned one. */
export function answerInKeyVersion(request: FastifyRequest, version: string): void {
  if (!request.apiVersionPinned) request.apiVersion = versionForStored(version);
}

export interface VersioningOptions {
  apiNamespace: string;
}

/** Installs the version hooks on the root instance: after the request-id hook, before any route. */
export function installVersioning(app: FastifyInstance, options: VersioningOptions): void {
  const namespacePrefix = `/api/${options.apiNamespace}/`;
  app.decorateRequest("apiVersion", null);
  app.decorateRequest("apiVersionPinned", false);

  // Any request may now answer 400 unknown_version: every documented route says so.
  app.addHook("onRoute", (route) => {
    const schema = route.schema as { hide?: boolean; response?: Record<string, unknown> } | undefined;
    if (schema?.response === undefined || schema.hide === true || schema.response["400"] !== undefined || schema.response["4xx"] !== undefined) return;
    // A copy: route modules share their schema objects (benchmarks build other apps from them).
    route.schema = { ...schema, response: { ...schema.response, ...errorResponses(400) } };
  });

  app.addHook("onRequest", async (request) => {
    request.apiVersion = currentVersion();
    const header = request.headers[VERSION_HEADER];
    if (header === undefined) return;
    const pinned = Array.isArray(header) ? header.join(", ") : header;
    const version = findVersion(pinned.trim());
    if (version === null) throw unknownVersionError(pinned, VERSION_HEADER);
    request.apiVersion = version;
    request.apiVersionPinned = true;
  });

  const onSend: onSendHookHandler<unknown> = (request: FastifyRequest, reply: FastifyReply, payload, done) => {
    // Bad-URL answers and the like never ran onRequest: they are in the current version.
    const version = request.apiVersion ?? currentVersion();
    reply.header(VERSION_HEADER, version.version);
    if (version.deprecationHeaders !== null) {
      reply.header("deprecation", version.deprecationHeaders.deprecation);
      reply.header("sunset", version.deprecationHeaders.sunset);
    }
    if (version.current || version.chain.length === 0) return done(null, payload);
    const url = request.routeOptions.url;
    const path = url === undefined ? null : url.startsWith(namespacePrefix) ? `/api/{namespace}/${url.slice(namespacePrefix.length)}` : url;
    if (!version.touches(routeKey(request.method, path))) return done(null, payload);
    if (typeof payload !== "string" && !Buffer.isBuffer(payload)) return done(null, payload);
    const type = reply.getHeader("content-type");
    if (typeof type !== "string" || !/^application\/(?:[\w.+-]+\+)?json\b/i.test(type)) return done(null, payload);
    let body: unknown;
    try {
      body = JSON.parse(payload.toString());
    } catch {
      return done(null, payload);
    }
    let out: string;
    try {
      // The parsed body is already a private copy: the steps may change it in place.
      out = JSON.stringify(renderResponseForVersion(version, { method: request.method, path, status: reply.statusCode }, body, { copied: true }));
    } catch (err) {
      // A step that fails is a bug: answered like any other, without internals, rather than in the wrong shape.
      request.log.error({ err, apiVersion: version.version }, "response transform failed");
      reply.code(500);
      out = JSON.stringify(errorBody("internal_error", "Internal error; the request id identifies it in the logs", request.id));
    }
    done(null, out);
  };
  app.addHook("onSend", onSend);
}
