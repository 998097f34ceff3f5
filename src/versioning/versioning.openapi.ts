// Documents versioning in /openapi.json: the current version as info.version, the `storefront-version`
// request header on every operation and the response header on every response.
import type { SwaggerTransformObject } from "@fastify/swagger";
import { VERSION_HEADER } from "./versioning.hook.ts";
import { currentVersion, knownVersions } from "./registry.ts";

interface OpenApiDocument {
  info: { version: string; [k: string]: unknown };
  paths?: Record<string, Record<string, unknown>>;
  [k: string]: unknown;
}

interface Operation {
  parameters?: unknown[];
  responses?: Record<string, { headers?: Record<string, unknown> }>;
}

const METHODS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);

/** For @fastify/swagger's transformObject (OpenAPI 3 documents; a Swagger 2 one is returned as it is). */
export const documentVersioning: SwaggerTransformObject = (documentObject) => {
  if (!("openapiObject" in documentObject)) return documentObject.swaggerObject;
  const doc = documentObject.openapiObject as unknown as OpenApiDocument;
  const versions = knownVersions().map((v) => v.version);
  doc.info.version = currentVersion().version;
  // Inline rather than $ref: every operation lists the header by name without resolving references.
  const parameter = {
    name: VERSION_HEADER,
    in: "header",
    required: false,
    description: "Answer in this API version instead of the key's remembered one (or the current one). An unknown version is 400 unknown_version.",
    schema: { type: "string", enum: versions },
  };
  const header = { description: "The API version this response is in.", schema: { type: "string", enum: versions } };
  for (const item of Object.values(doc.paths ?? {})) {
    for (const [method, value] of Object.entries(item)) {
      if (!METHODS.has(method)) continue;
      const operation = value as Operation;
      operation.parameters = [...(operation.parameters ?? []), parameter];
      for (const response of Object.values(operation.responses ?? {})) {
        response.headers = { ...response.headers, [VERSION_HEADER]: header };
      }
    }
  }
  return doc as unknown as typeof documentObject.openapiObject;
};
