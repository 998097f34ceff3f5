// axe-core in the console's pages: injected through the DevTools protocol (page.evaluate is not subject to
// the page's CSP, which rightly refuses an inline script), run over the whole document, shadow roots
// included (the editors live in them). Returns the serious and critical violations, one line each.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export async function seriousViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate("typeof globalThis.axe === 'object'"))) await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate<{ id: string; impact: string; help: string; targets: string[] }[]>(`
    axe.run(document, { resultTypes: ["violations"] }).then((r) =>
      r.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 5).map((n) => JSON.stringify(n.target) + " " + (n.failureSummary || "").split("\\n").slice(1, 2).join("")) })),
    )`);
  return found.map((v) => `${v.impact} ${v.id} (${v.help}): ${v.targets.join(" | ")}`);
}
