// The API versions this service serves, one entry per version (README, "API versions"; CHANGELOG.md tells the story).
// A breaking change ships as a new version at the top of this list; the version it replaces then gets the
// steps that turn the new shapes back into its own (transformResponse / transformEvent), a deprecation
// date and a sunset at least 12 months later. Additive changes need no new version.
import type { ApiVersionDefinition } from "./registry.ts";

export const VERSIONS: readonly ApiVersionDefinition[] = [
  {
    version: "2026-11-23",
    summary: "First dated version: the read API, webhooks, admin API and events as documented in /openapi.json.",
  },
];
