// The registry of API versions (README, "API versions"): which date versions exist, which is current, and the chain of
// steps that turns today's response and event shapes into an older version's. Routes know nothing of it.
//
// Each version other than the newest carries the steps that turn the shapes of the version after it into
// its own; serving version V applies the steps of every version from the newest one down to V. Adding a
// version therefore touches only the version it replaces, never the older ones.
import { AppError } from "../errors.ts";
import { VERSIONS } from "./versions.ts";

/** A response as the versioning hook sees it: method, route pattern with `{namespace}`, status. */
export interface ResponseRoute {
  method: string;
  /** Route pattern with the API namespace written `{namespace}` (`/api/{namespace}/customers`); null when no route matched. */
  path: string | null;
  status: number;
}

/** An outbound event (docs/events.md), as the feed and the endpoints send it. */
export interface VersionedEvent {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
  [field: string]: unknown;
}

export interface ApiVersionDefinition {
  /** `YYYY-MM-DD`. */
  version: string;
  /** What changed in it, one line (the CHANGELOG has the full story). */
  summary: string;
  /** When it was (or will be) deprecated: responses in it then carry `Deprecation` and `Sunset`. */
  deprecatedAt?: Date;
  /** When it stops being served; required with deprecatedAt, at least 12 months after the next version. */
  sunsetAt?: Date;
  /**
   * Route keys (`"GET /api/{namespace}/customers"`, or `"*"` for every JSON response) whose bodies
   * transformResponse changes. Responses of other routes pass through without being parsed.
   */
  responseRoutes?: readonly string[];
  /**
   * Turns a response body of the next newer version into this version's. Gets a private copy; may mutate it.
   * Called for every status of the listed routes, errors included: look at route.status.
   */
  transformResponse?(route: ResponseRoute, body: unknown): unknown;
  /** Turns an event of the next newer version into this version's. Gets a private copy; may mutate it. */
  transformEvent?(event: VersionedEvent): VersionedEvent;
}

/** A registered version with what serving it costs precomputed. */
export interface ApiVersion {
  readonly version: string;
  readonly summary: string;
  readonly current: boolean;
  /** `Deprecation` and `Sunset` header values, or null while the version is not deprecated. */
  readonly deprecationHeaders: { deprecation: string; sunset: string } | null;
  /** The steps from today's shapes to this version's, newest first; empty for the current version. */
  readonly chain: readonly ApiVersionDefinition[];
  /** Whether some step of the chain changes this route's responses. */
  touches(routeKey: string): boolean;
}

const VERSION_FORMAT = /^\d{4}-\d{2}-\d{2}$/;

export const routeKey = (method: string, path: string | null): string => `${method} ${path ?? "*"}`;

/** The event feed: its events are rendered with the version's event steps, like an endpoint's. */
export const FEED_ROUTE = "GET /api/{namespace}/events";

const definitions = new Map<string, ApiVersionDefinition>();
let compiled: { byName: Map<string, ApiVersion>; ordered: ApiVersion[] } | null = null;

function compile(): { byName: Map<string, ApiVersion>; ordered: ApiVersion[] } {
  if (compiled !== null) return compiled;
  const newestFirst = [...definitions.values()].sort((a, b) => (a.version < b.version ? 1 : a.version > b.version ? -1 : 0));
  const ordered: ApiVersion[] = newestFirst.map((def, i) => {
    const chain = newestFirst.slice(1, i + 1);
    const routes = new Set(chain.flatMap((step) => (step.transformResponse ? (step.responseRoutes ?? ["*"]) : [])));
    if (chain.some((step) => step.transformEvent !== undefined)) routes.add(FEED_ROUTE);
    const everything = routes.has("*");
    return {
      version: def.version,
      summary: def.summary,
      current: i === 0,
      deprecationHeaders:
        def.deprecatedAt && def.sunsetAt
          ? { deprecation: `@${Math.floor(def.deprecatedAt.getTime() / 1000)}`, sunset: def.sunsetAt.toUTCString() }
          : null,
      chain,
      touches: (key) => everything || routes.has(key),
    };
  });
  compiled = { byName: new Map(ordered.map((v) => [v.version, v])), ordered };
  return compiled;
}

/** Adds a version; returns how to take it out again (tests register versions of their own). */
export function registerVersion(def: ApiVersionDefinition): () => void {
  if (!VERSION_FORMAT.test(def.version) || Number.isNaN(Date.parse(`${def.version}T00:00:00Z`))) {
    throw new Error(`API version "${def.version}" is not a YYYY-MM-DD date`);
  }
  if (definitions.has(def.version)) throw new Error(`API version ${def.version} is registered twice`);
  if ((def.deprecatedAt === undefined) !== (def.sunsetAt === undefined)) {
    throw new Error(`API version ${def.version}: deprecatedAt and sunsetAt go together`);
  }
  definitions.set(def.version, def);
  compiled = null;
  return () => {
    if (definitions.get(def.version) === def) {
      definitions.delete(def.version);
      compiled = null;
    }
  };
}

/** The newest registered version: what a request without a pin and a new key get. */
export function currentVersion(): ApiVersion {
  const current = compile().ordered[0];
  if (current === undefined) throw new Error("no API version is registered");
  return current;
}

/** Every version still served, newest first. */
export function knownVersions(): readonly ApiVersion[] {
  return compile().ordered;
}

/** The version of that name, or null when the service does not serve it. */
export function findVersion(name: string): ApiVersion | null {
  return compile().byName.get(name) ?? null;
}

/** 400 unknown_version naming the versions the service serves. */
export function unknownVersionError(given: string, param: string): AppError {
  const known = knownVersions().map((v) => v.version);
  const shown = given.length > 40 ? `${given.slice(0, 40)}…` : given;
  return new AppError("unknown_version", `Unknown API version "${shown}"; known versions: ${known.join(", ")}`, {
    param,
    details: { knownVersions: known },
  });
}

/**
 * The version a key or endpoint is to remember, at creation or when changed: the one asked for, which must
 * be served (else 400 unknown_version on `param`), or the current one.
 */
export function versionToRemember(asked: string | undefined, param = "version"): string {
  if (asked === undefined) return currentVersion().version;
  if (findVersion(asked) === null) throw unknownVersionError(asked, param);
  return asked;
}

/**
 * The version to answer something that remembered `name` (a key, an endpoint): that version while it is
 * served; once it has been retired, the oldest version still served after it, since that is the closest shape.
 */
export function versionForStored(name: string): ApiVersion {
  const exact = findVersion(name);
  if (exact !== null) return exact;
  const later = compile().ordered.filter((v) => v.version > name);
  return later.at(-1) ?? currentVersion();
}

/**
 * A response body in `version`'s shape: the body itself when no step touches the route, else a transformed
 * copy (`copied: true` when the body is already a private copy, e.g. freshly parsed, to skip copying it).
 */
export function renderResponseForVersion(version: ApiVersion, route: ResponseRoute, body: unknown, options: { copied?: boolean } = {}): unknown {
  const key = routeKey(route.method, route.path);
  if (!version.touches(key)) return body;
  let out = options.copied ? body : structuredClone(body);
  for (const step of version.chain) {
    if (step.transformEvent && key === FEED_ROUTE && route.status === 200) renderFeedEvents(out, (e) => step.transformEvent!(e));
    if (step.transformResponse && (step.responseRoutes === undefined || step.responseRoutes.includes("*") || step.responseRoutes.includes(key))) {
      out = step.transformResponse(route, out);
    }
  }
  return out;
}

/** The feed page's events (`data` or `data.events`), each replaced by the step's rendering. */
function renderFeedEvents(page: unknown, step: (event: VersionedEvent) => VersionedEvent): void {
  const data = (page as { data?: unknown } | null)?.data;
  const events = Array.isArray(data) ? data : Array.isArray((data as { events?: unknown } | null)?.events) ? (data as { events: unknown[] }).events : null;
  if (events === null) return;
  for (let i = 0; i < events.length; i++) events[i] = step(events[i] as VersionedEvent);
}

/**
 * An event's payload in the shape of `version` (an endpoint's remembered version): the event itself for the
 * current version, otherwise a transformed copy (the original is never changed, other endpoints share it).
 */
export function renderEventForVersion(version: string, event: VersionedEvent): VersionedEvent {
  const target = versionForStored(version);
  const steps = target.chain.filter((step) => step.transformEvent !== undefined);
  if (steps.length === 0) return event;
  let out = structuredClone(event);
  for (const step of steps) out = step.transformEvent!(out);
  return out;
}

for (const def of VERSIONS) registerVersion(def);
