// Whole numbers in a query string or a path are plain decimal digits. The validator coerces strings
// with JavaScript's Number(), which also reads "0x10" as 16, " 5" and "5 " as 5 and "1e1" as 10; a
// client that sent those meant something else (or is probing), so they are refused before validation.
import type { FastifyRequest } from "fastify";
import { AppError } from "../errors.ts";

const DIGITS = /^[0-9]+$/;
const SIGNED_DIGITS = /^-?[0-9]+$/;

interface PropertySchema {
  type?: unknown;
  minimum?: unknown;
}

type Properties = Record<string, PropertySchema>;

const propertiesOf = (schema: unknown): Properties | null => {
  const properties = (schema as { properties?: unknown } | undefined)?.properties;
  return properties !== null && typeof properties === "object" ? (properties as Properties) : null;
};

/** Throws 400 naming the parameter when a whole-number parameter is not written in plain decimal digits. */
function checkValues(values: unknown, properties: Properties | null): void {
  if (properties === null || values === null || typeof values !== "object") return;
  for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
    const schema = properties[name];
    if (schema?.type !== "integer" || typeof value !== "string") continue;
    const pattern = typeof schema.minimum === "number" && schema.minimum >= 0 ? DIGITS : SIGNED_DIGITS;
    if (!pattern.test(value)) {
      throw new AppError("invalid_request", `${name} must be a whole number in decimal digits, got "${value.slice(0, 32)}"`, { param: name });
    }
  }
}

/** preValidation hook: runs on the raw strings, before the validator coerces them. */
export async function requirePlainIntegers(request: FastifyRequest): Promise<void> {
  const schema = request.routeOptions.schema as { querystring?: unknown; params?: unknown } | undefined;
  if (schema === undefined) return;
  checkValues(request.query, propertiesOf(schema.querystring));
  checkValues(request.params, propertiesOf(schema.params));
}
