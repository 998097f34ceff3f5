// The merchant's plugin test runner: runs one Lua plugin in the real sandbox against recorded
// requests (fixtures, src/plugins/fixtures.ts) with no database and no server, and reports pass or fail
// per fixture. `storefront plugins test FILE.lua --fixtures DIR`. A fixture's `now` is the sandbox's
// clock for the run (RunInput.clockMs), so recorded, timestamped signatures stay valid; its `http`
// answers are played by a local server (mock-server.ts) for plugins that call their provider's API.
import { readFileSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { type Fixture, loadFixtures } from "../../src/plugins/fixtures.ts";
import { createSandbox, type Sandbox, type SandboxLimits } from "../../src/sandbox/index.ts";
import { needsMockServer, secretsFor, startMockServer } from "./mock-server.ts";
import { type CaseReport, describeExpectation, describeOutcome, judge, type TestRun } from "./report.ts";

export interface RunFixturesOptions {
  /** A sandbox to use (closed by the caller); by default one is created and closed here. */
  sandbox?: Sandbox;
  limits?: Partial<SandboxLimits>;
}

/** Runs the plugin against each fixture in turn. Never throws for anything the plugin does. */
export async function runFixtures(source: string, fixtures: Fixture[], options: RunFixturesOptions = {}): Promise<CaseReport[]> {
  const mock = needsMockServer(fixtures) ? await startMockServer() : null;
  const sandbox =
    options.sandbox ??
    createSandbox({
      poolSize: 1,
      ...options.limits,
      fetchAllow: [...(options.limits?.fetchAllow ?? []), ...(mock ? ["127.0.0.1"] : [])],
    });
  const reports: CaseReport[] = [];
  try {
    for (const fixture of fixtures) {
      const secrets = secretsFor(fixture, mock);
      mock?.use(fixture.http);
      const started = performance.now();
      const outcome = await sandbox.run(
        {
          source,
          request: fixture.request,
          store: fixture.store,
          plugin: fixture.plugin,
          secrets,
          // The fixture's time is the sandbox's clock: os.time() and os.date() answer it, however reached.
          ...(fixture.now === null ? {} : { clockMs: fixture.now * 1000 }),
        },
        { getInvoice: async (id) => fixture.invoices[id] ?? null },
      );
      const problems = judge(fixture.expect, outcome);
      reports.push({
        name: fixture.name,
        file: fixture.file,
        passed: problems.length === 0,
        expected: describeExpectation(fixture.expect),
        actual: describeOutcome(outcome),
        problems,
        outcome,
        durationMs: performance.now() - started,
      });
    }
  } finally {
    if (!options.sandbox) await sandbox.close();
    await mock?.close();
  }
  return reports;
}

/** Loads the fixtures of `dir` and runs the plugin file against them. */
export async function testPlugin(pluginFile: string, fixturesDir: string, options: RunFixturesOptions & { env?: NodeJS.ProcessEnv; only?: string } = {}): Promise<TestRun> {
  const source = readFileSync(pluginFile, "utf8");
  const pluginName = path.basename(pluginFile, ".lua");
  const loads = loadFixtures(fixturesDir, { pluginName, ...(options.env ? { env: options.env } : {}) });
  const selected = options.only ? loads.filter((l) => (l.ok ? l.fixture.name : l.file).includes(options.only!)) : loads;
  const fixtures = selected.flatMap((l) => (l.ok ? [l.fixture] : []));
  const broken: CaseReport[] = selected.flatMap((l) =>
    l.ok ? [] : [{ name: path.basename(l.file), file: l.file, passed: false, expected: "-", actual: "unreadable", problems: [l.message], outcome: null, durationMs: 0 }],
  );
  const reports = [...broken, ...(await runFixtures(source, fixtures, options))];
  const passed = reports.filter((r) => r.passed).length;
  return { plugin: pluginFile, reports, passed, failed: reports.length - passed };
}
