// The verdicts of a plugin test run: what a run gave judged against what its fixture expects, and the
// pass/fail table `storefront plugins test` prints.
import type { FixtureExpectation, FixtureLogExpectation } from "../../src/plugins/fixtures.ts";
import type { LogLine, RunOutcome } from "../../src/sandbox/index.ts";

export interface CaseReport {
  name: string;
  file: string;
  passed: boolean;
  expected: string;
  actual: string;
  /** Why it failed, one line each; empty when it passed. */
  problems: string[];
  outcome: RunOutcome | null;
  durationMs: number;
}

export interface TestRun {
  plugin: string;
  reports: CaseReport[];
  passed: number;
  failed: number;
}

export function describeOutcome(outcome: RunOutcome): string {
  if (!outcome.ok) return `${outcome.error.kind}`;
  return outcome.result.invoiceId === undefined ? outcome.result.status : `${outcome.result.status} ${outcome.result.invoiceId}`;
}

export function describeExpectation(e: FixtureExpectation): string {
  if (e.kind === "error") return e.error;
  return e.invoiceId === null ? e.status : `${e.status} ${e.invoiceId}`;
}

function logProblems(expected: FixtureLogExpectation[], logs: LogLine[]): string[] {
  const problems: string[] = [];
  for (const want of expected) {
    const found = logs.some((l) => l.description.includes(want.contains) && (want.type === null || l.type === want.type));
    if (!found) problems.push(`no ${want.type ?? ""}${want.type ? " " : ""}log line containing "${want.contains}"`);
  }
  return problems;
}

/** Compares what the run gave with what the fixture expects; empty when they agree. */
export function judge(expect: FixtureExpectation, outcome: RunOutcome): string[] {
  const problems: string[] = [];
  if (expect.kind === "result") {
    if (!outcome.ok) {
      problems.push(`expected ${describeExpectation(expect)}, the run failed with ${outcome.error.kind}: ${outcome.error.message}`);
    } else {
      if (outcome.result.status !== expect.status) problems.push(`status: expected ${expect.status}, got ${outcome.result.status}`);
      const got = outcome.result.invoiceId ?? null;
      if (got !== expect.invoiceId) problems.push(`invoiceId: expected ${expect.invoiceId ?? "none"}, got ${got ?? "none"}`);
    }
  } else if (outcome.ok) {
    problems.push(`expected the run to fail with ${expect.error}, it returned ${describeOutcome(outcome)}`);
  } else {
    if (outcome.error.kind !== expect.error) problems.push(`error: expected ${expect.error}, got ${outcome.error.kind}: ${outcome.error.message}`);
    if (expect.message !== null && !outcome.error.message.includes(expect.message)) {
      problems.push(`error message "${outcome.error.message}" does not contain "${expect.message}"`);
    }
  }
  return [...problems, ...logProblems(expect.logs, outcome.logs)];
}

/** The pass/fail table, then the details of every failure. */
export function formatTestRun(run: TestRun, options: { verbose?: boolean } = {}): string {
  const rows = run.reports.map((r) => [r.passed ? "PASS" : "FAIL", r.name, r.expected, r.actual, `${r.durationMs.toFixed(1)} ms`]);
  const header = ["", "fixture", "expected", "got", "time"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  const out = [`${run.plugin}`, line(header), ...rows.map(line)];
  for (const r of run.reports) {
    if (r.passed && !options.verbose) continue;
    out.push("", `${r.passed ? "PASS" : "FAIL"} ${r.name} (${r.file})`);
    for (const p of r.problems) out.push(`  - ${p}`);
    if (r.outcome && !r.outcome.ok) out.push(`  error: ${r.outcome.error.kind}${r.outcome.error.line ? ` (line ${r.outcome.error.line})` : ""}: ${r.outcome.error.message}`);
    for (const l of r.outcome?.logs ?? []) out.push(`  log ${l.type}: ${l.description}`);
    for (const f of r.outcome?.fetches ?? []) out.push(`  fetch ${f.method} ${f.url} -> ${f.status ?? f.error}`);
  }
  out.push("", `${run.passed} passed, ${run.failed} failed${run.reports.length === 0 ? " (no fixtures found)" : ""}`);
  return out.join("\n") + "\n";
}
