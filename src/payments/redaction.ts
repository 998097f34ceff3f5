// Secret values are scrubbed from what is recorded or shown of a run (its log lines, fetches, error
// messages, the stored copies of its result and answer), never from the decision itself.
import type { FetchRecord, LogLine, RunOutcome } from "../sandbox/index.ts";

export type Redact = (text: string) => string;

/** Replaces each secret value (4+ characters) in a string; longest first so overlapping values stay hidden. */
export function createRedactor(secrets: Record<string, string>): Redact {
  const values = Object.values(secrets)
    .filter((v) => v.length >= 4)
    .sort((a, b) => b.length - a.length);
  if (values.length === 0) return (t) => t;
  return (text) => {
    let out = text;
    for (const v of values) if (out.includes(v)) out = out.split(v).join("[secret]");
    return out;
  };
}

/** The recorded copy of a JSON value: every string scrubbed; keys and structure left as they are. */
export function scrubValue(value: unknown, redact: Redact): unknown {
  if (typeof value === "string") return redact(value);
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, redact));
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubValue(v, redact)]));
  return value;
}

/** What a run leaves to be recorded and shown, scrubbed. The result itself is never touched here. */
export interface RunTraces {
  logs: LogLine[];
  fetches: FetchRecord[];
  error: { kind: string; message: string; line?: number } | null;
}

export function scrubTraces(outcome: RunOutcome, redact: Redact): RunTraces {
  return {
    logs: outcome.logs.map((l) => ({ ...l, description: redact(l.description) })),
    fetches: outcome.fetches.map((f) => ({ ...f, url: redact(f.url), error: f.error === null ? null : redact(f.error) })),
    error: outcome.ok ? null : { ...outcome.error, message: redact(outcome.error.message) },
  };
}
