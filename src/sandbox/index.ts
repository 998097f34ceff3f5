// The Lua plugin sandbox: runs a store's untrusted payment-plugin script against one webhook, in a
// pool of worker threads, within the limits of docs/plugins.md, "Limits". See docs/decisions/0002-sandbox-engine.md; the plugin author's view is docs/plugins.md.
export { createSandbox } from "./pool/sandbox.pool.ts";
export { defaultSandboxLimits } from "./sandbox.limits.ts";
export type {
  CompileCheck,
  FetchRecord,
  LogLine,
  LogType,
  LookupFunction,
  PluginRequest,
  PluginResult,
  RunError,
  RunErrorKind,
  RunInput,
  RunOutcome,
  Sandbox,
  SandboxDeps,
  SandboxHost,
  SandboxLimits,
} from "./sandbox.types.ts";
