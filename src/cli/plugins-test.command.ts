// `storefront plugins test FILE.lua --fixtures DIR`: runs a plugin against recorded requests in the
// real sandbox, with no database and no server; prints a pass/fail table, exits 1 on any failure.
import type { Command } from "commander";
import type { TestRun } from "../../tools/plugin-test/report.ts";
import { roundMs } from "../payments/payment-views.ts";
import { readInput } from "./context.ts";

/** Where the command writes and how it fails; the process by default (tests substitute it). */
export interface PluginTestIo {
  write(text: string): void;
  setExitCode(code: number): void;
}

const processIo: PluginTestIo = {
  write: (text) => {
    process.stdout.write(text);
  },
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

export function registerPluginTestCommand(program: Command, io: PluginTestIo = processIo): void {
  // Lives under the existing `plugins` command; standing alone when there is none (tests).
  const plugins = program.commands.find((c) => c.name() === "plugins") ?? program.command("plugins");
  plugins
    .command("test <file.lua>")
    .description("run a plugin against fixture files (recorded requests and expected results); no database or server")
    .requiredOption("--fixtures <dir>", "directory of fixture .json files (see docs/plugins.md, 'Testing a plugin')")
    .option("--only <text>", "run only the fixtures whose name contains this text")
    .option("--verbose", "show the logs and fetches of passing fixtures too")
    .option("--json", "print the run as JSON: every fixture with its verdict and problems")
    .action(async (file: string, opts: { fixtures: string; only?: string; verbose?: boolean; json?: boolean }) => {
      readInput(file, "plugin file"); // a missing file is one line, not a stack
      const [{ testPlugin }, { formatTestRun }] = await Promise.all([import("../../tools/plugin-test/runner.ts"), import("../../tools/plugin-test/report.ts")]);
      const run = await testPlugin(file, opts.fixtures, opts.only ? { only: opts.only } : {});
      io.write(opts.json ? JSON.stringify(testRunView(run), null, 2) + "\n" : formatTestRun(run, { verbose: opts.verbose === true }));
      if (run.failed > 0 || run.reports.length === 0) io.setExitCode(1);
    });
}


/** The run without the raw sandbox outcomes: what a script needs to know per fixture. */
function testRunView(run: TestRun) {
  return {
    plugin: run.plugin,
    passed: run.passed,
    failed: run.failed,
    fixtures: run.reports.map((r) => ({ name: r.name, file: r.file, passed: r.passed, expected: r.expected, actual: r.actual, problems: r.problems, durationMs: roundMs(r.durationMs) })),
  };
}
