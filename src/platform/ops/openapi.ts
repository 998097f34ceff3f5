// Completes the generated OpenAPI document so that tools accept it (`npm run lint:openapi`, Redocly's
// recommended rules) without every route having to spell it out: an operationId derived from the method
// and path, `security: []` on public routes and a 401 on the others, response descriptions taken from
// the closed list of error codes, the servers entry, and examples from the demo data. It runs once, on
// the finished document (fastify-swagger's transformObject), so routes added anywhere get it too; what a
// route declares itself is kept.
import { errorStatus } from "../../errors.ts";

type Json = Record<string, unknown>;

interface Operation {
  operationId?: string;
  summary?: string;
  security?: Record<string, string[]>[];
  responses?: Record<string, { description?: string; content?: Json }>;
  requestBody?: { content?: Record<string, { example?: unknown; examples?: unknown }> };
}

const METHODS = ["get", "put", "post", "delete", "patch", "options", "head", "trace"] as const;
const DEFAULT_DESCRIPTION = "Default Response";

/** The error codes answered with each status, from the one list in src/errors.ts. */
function codesByStatus(): Map<number, string[]> {
  const map = new Map<number, string[]>();
  for (const [code, status] of Object.entries(errorStatus)) map.set(status, [...(map.get(status) ?? []), code]);
  return map;
}

const STATUS_MEANING: Record<number, string> = {
  400: "The request is invalid; error.param names the parameter or property at fault",
  401: "Missing or invalid credentials (or, for a webhook, the plugin rejected the delivery)",
  403: "The key lacks the scope this operation needs",
  404: "Not found; error.code says what is missing",
  405: "Method not allowed",
  409: "The invoice's status does not allow this; error.currentStatus is its status",
  413: "The body is larger than allowed",
  415: "Unsupported content type",
  422: "The plugin source does not compile; the message names the line",
  429: "Rate limit exceeded; Retry-After says when to try again",
  500: "Internal error (details are logged with the request id), or the plugin failed",
  503: "Temporarily unavailable (shutting down, or the database does not answer); Retry-After when known",
  504: "The plugin did not finish within its time limit",
};

function describeStatus(status: string, op: Operation, codes: Map<number, string[]>): string {
  const n = Number(status);
  if (n >= 200 && n < 300) {
    const what = op.summary ?? "Success";
    return n === 201 ? `Created: ${lowerFirst(what)}` : n === 204 ? `Done, no content: ${lowerFirst(what)}` : `Success: ${lowerFirst(what)}`;
  }
  const meaning = STATUS_MEANING[n] ?? `HTTP ${status}`;
  const list = codes.get(n);
  return list ? `${meaning}. error.code: ${list.join(", ")}.` : `${meaning}.`;
}

const lowerFirst = (s: string) => (s === "" ? s : s[0]!.toLowerCase() + s.slice(1));
const upperFirst = (s: string) => (s === "" ? s : s[0]!.toUpperCase() + s.slice(1));
const camel = (word: string) => word.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w, i) => (i === 0 ? w : upperFirst(w))).join("");
const singular = (word: string) => (word.endsWith("ies") ? word.slice(0, -3) + "y" : word.endsWith("s") && !word.endsWith("ss") ? word.slice(0, -1) : word);

/**
 * `GET /api/admin/stores/{storeId}/plugins/{name}/versions` → `listPluginVersions`; `POST …/invoices/{id}/cancel`
 * → `cancelInvoice`; `POST /api/admin/stores` → `createStore`; `GET …/deliveries/{deliveryId}` → `getDelivery`.
 * The API prefix and the store the path is scoped to are left out; a word followed by its id is singular.
 */
export function deriveOperationId(method: string, path: string, prefixes: string[]): string {
  let rest = path;
  for (const p of prefixes) if (rest === p || rest.startsWith(p + "/")) rest = rest.slice(p.length);
  const segments = rest.split("/").filter(Boolean);
  // "stores/{storeId}/…": every admin path is scoped to a store; the store itself is named only when it is the subject.
  if (segments[0] === "stores" && segments[1]?.startsWith("{") && segments.length > 2) segments.splice(0, 2);
  const words: string[] = [];
  let action: string | null = null;
  segments.forEach((seg, i) => {
    if (seg.startsWith("{")) return;
    const followedByParam = segments[i + 1]?.startsWith("{") ?? false;
    const afterParam = i > 0 && segments[i - 1]!.startsWith("{");
    const last = i === segments.length - 1;
    if (last && afterParam && method !== "get") action = camel(seg); // POST …/{id}/cancel
    else words.push(followedByParam ? singular(seg) : seg);
  });
  const lastSeg = segments.at(-1) ?? "";
  const endsWithParam = lastSeg.startsWith("{");
  let verb: string;
  let nouns = words;
  if (action !== null) verb = action;
  else if (method === "get") verb = endsWithParam || !lastSeg.endsWith("s") ? "get" : "list";
  else if (method === "post") {
    verb = "create";
    nouns = words.map((w, i) => (i === words.length - 1 ? singular(w) : w));
  } else verb = { put: "put", delete: "delete", patch: "update" }[method] ?? method;
  return verb + nouns.map((w) => upperFirst(camel(w))).join("");
}

export interface CompleteOptions {
  /** Path prefixes left out of derived operationIds (`/api/admin`, `/api/service`, `/api`). */
  prefixes: string[];
  /** Component schema name → example. */
  examples: Record<string, unknown>;
  /** operationId → example of its JSON request body. */
  requestExamples?: Record<string, unknown>;
}

export function completeOpenApi<T extends Json>(doc: T, options: CompleteOptions): T {
  const codes = codesByStatus();
  const out = doc as Json;
  out.servers ??= [{ url: "/", description: "This storefront service (the address the document was read from)" }];
  const paths = (out.paths ?? {}) as Record<string, Record<string, Operation>>;
  const used = new Set<string>();
  for (const ops of Object.values(paths)) for (const m of METHODS) if (ops[m]?.operationId) used.add(ops[m]!.operationId!);

  for (const [path, ops] of Object.entries(paths)) {
    for (const method of METHODS) {
      const op = ops[method];
      if (!op) continue;
      if (op.operationId === undefined) {
        let id = deriveOperationId(method, path, options.prefixes);
        // Two routes that derive the same name: the second spells its whole path.
        if (used.has(id)) id = method + path.split("/").filter(Boolean).map((s) => upperFirst(camel(s.replace(/[{}]/g, "")))).join("");
        used.add(id);
        op.operationId = id;
      }
      // No security declared: the route is public (its own checks, if any, are in its description).
      op.security ??= [];
      // The console's session cookie is accepted wherever the admin token is (src/admin/admin.auth.ts).
      if (op.security.some((s) => "adminToken" in s) && !op.security.some((s) => "consoleSession" in s)) op.security.push({ consoleSession: [] });
      op.responses ??= {};
      if (op.security.length > 0 && op.responses["401"] === undefined) {
        op.responses["401"] = { content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
      }
      const bodyExample = options.requestExamples?.[op.operationId];
      const json = op.requestBody?.content?.["application/json"];
      if (bodyExample !== undefined && json && json.example === undefined && json.examples === undefined) json.example = bodyExample;
      for (const [status, response] of Object.entries(op.responses)) {
        if (response.description === undefined || response.description === DEFAULT_DESCRIPTION) response.description = describeStatus(status, op, codes);
      }
    }
  }

  const schemas = ((out.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
  for (const [name, example] of Object.entries(options.examples)) {
    const schema = schemas[name];
    if (schema && schema.examples === undefined) schema.examples = [example];
  }
  return doc;
}
