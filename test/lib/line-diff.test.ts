// The line diff behind `plugins diff`: its edits rebuild both texts, are as few as possible, and print as
// the unified diff that `diff -u` prints.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { diffLines, splitLines, unifiedDiff } from "../../src/lib/line-diff.ts";

/** Fewest removed + added lines (through the longest common subsequence). */
function minimalEdits(a: string[], b: string[]): number {
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  return a.length + b.length - 2 * lcs[0]![0]!;
}

const text = fc.array(fc.constantFrom("a", "b", "c", "local x = 1", "end", ""), { maxLength: 25 }).map((lines) => lines.map((l) => l + "\n").join(""));

test("the edits rebuild the old and the new text, and are as few as possible", () => {
  fc.assert(
    fc.property(text, text, (before, after) => {
      const d = diffLines(before, after);
      assert.deepEqual(d.ops.filter((o) => o.kind !== "added").map((o) => o.line), splitLines(before));
      assert.deepEqual(d.ops.filter((o) => o.kind !== "removed").map((o) => o.line), splitLines(after));
      assert.equal(d.added + d.removed, minimalEdits(splitLines(before), splitLines(after)));
    }),
    { numRuns: 500 },
  );
});

test("equal texts have no diff", () => {
  const d = diffLines("a\nb\n", "a\nb\n");
  assert.equal(d.added + d.removed, 0);
  assert.equal(unifiedDiff(d, { from: "v1", to: "v2" }), "");
});

test("patch(1) applies the unified diff to the old text and gets the new one", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "line-diff-"));
  try {
    fc.assert(
      fc.property(text, text, (before, after) => {
        const ours = unifiedDiff(diffLines(before, after), { from: "a", to: "a" });
        fc.pre(ours !== "");
        writeFileSync(path.join(dir, "a"), before);
        writeFileSync(path.join(dir, "d.patch"), ours);
        execFileSync("patch", ["--quiet", "--force", "-u", "a", "d.patch"], { cwd: dir });
        assert.equal(readFileSync(path.join(dir, "a"), "utf8"), after);
      }),
      { numRuns: 150 },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a one-line change in a longer file gives one hunk with three lines of context", () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";
  const after = before.replace("line 10\n", "line ten\n");
  assert.equal(
    unifiedDiff(diffLines(before, after), { from: "pay v1", to: "pay v2" }),
    ["--- pay v1", "+++ pay v2", "@@ -7,7 +7,7 @@", " line 7", " line 8", " line 9", "-line 10", "+line ten", " line 11", " line 12", " line 13", ""].join("\n"),
  );
});
