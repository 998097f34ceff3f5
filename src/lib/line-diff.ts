// Line differences between two texts as a unified diff (the format of `diff -u` and `git diff`), for
// comparing two versions of a plugin. Myers' O((N+M)·D) algorithm after trimming the common ends; when the
// texts differ in more than MAX_EDITS lines it stops searching and reports the middle as replaced.

export type DiffOp = { kind: "same" | "removed" | "added"; line: string };

export interface LineDiff {
  ops: DiffOp[];
  added: number;
  removed: number;
}

const MAX_EDITS = 1000; // keeps the search's memory under ~8 MB

/** Splits on \n (a final newline does not make an empty last line). */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

export function diffLines(before: string, after: string): LineDiff {
  const a = splitLines(before);
  const b = splitLines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const middle = myers(a.slice(start, endA), b.slice(start, endB));
  const ops: DiffOp[] = [
    ...a.slice(0, start).map((line): DiffOp => ({ kind: "same", line })),
    ...middle,
    ...a.slice(endA).map((line): DiffOp => ({ kind: "same", line })),
  ];
  return { ops, added: ops.filter((o) => o.kind === "added").length, removed: ops.filter((o) => o.kind === "removed").length };
}

/** The shortest edit script from a to b (removals before additions within a change). */
function myers(a: string[], b: string[]): DiffOp[] {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((line) => ({ kind: "added", line }));
  if (m === 0) return a.map((line) => ({ kind: "removed", line }));
  const max = Math.min(n + m, MAX_EDITS);
  const offset = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    const next = v;
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      next[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, offset, a, b);
    }
    v = next;
  }
  // Too different to be worth the search: everything in the middle was replaced.
  return [...a.map((line): DiffOp => ({ kind: "removed", line })), ...b.map((line): DiffOp => ({ kind: "added", line }))];
}

function backtrack(trace: Int32Array[], offset: number, a: string[], b: string[]): DiffOp[] {
  const ops: DiffOp[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d]!; // the furthest reach on each diagonal before step d
    const k = x - y;
    const down = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!);
    const prevK = down ? k + 1 : k - 1;
    const prevX = v[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      ops.push({ kind: "same", line: a[x]! });
    }
    if (d === 0) break;
    if (down) ops.push({ kind: "added", line: b[--y]! });
    else ops.push({ kind: "removed", line: a[--x]! });
  }
  return ops.reverse();
}

/** `diff -u` text with `context` lines around each change; "" when the texts are equal. */
export function unifiedDiff(diff: LineDiff, labels: { from: string; to: string }, context = 3): string {
  const { ops } = diff;
  if (diff.added === 0 && diff.removed === 0) return "";
  const out = [`--- ${labels.from}`, `+++ ${labels.to}`];
  // Line numbers before each op, in the old and the new text.
  const oldAt: number[] = [];
  const newAt: number[] = [];
  let o = 0;
  let nn = 0;
  for (const op of ops) {
    oldAt.push(o);
    newAt.push(nn);
    if (op.kind !== "added") o++;
    if (op.kind !== "removed") nn++;
  }
  let i = 0;
  while (i < ops.length) {
    while (i < ops.length && ops[i]!.kind === "same") i++;
    if (i >= ops.length) break;
    const first = Math.max(0, i - context);
    // Extend the hunk while the next change is within 2×context same lines.
    let end = i;
    for (;;) {
      while (end < ops.length && ops[end]!.kind !== "same") end++;
      let same = end;
      while (same < ops.length && ops[same]!.kind === "same") same++;
      if (same < ops.length && same - end <= 2 * context) end = same;
      else {
        end = Math.min(ops.length, end + context);
        break;
      }
    }
    const hunk = ops.slice(first, end);
    const oldCount = hunk.filter((h) => h.kind !== "added").length;
    const newCount = hunk.filter((h) => h.kind !== "removed").length;
    const oldStart = oldCount === 0 ? oldAt[first]! : oldAt[first]! + 1;
    const newStart = newCount === 0 ? newAt[first]! : newAt[first]! + 1;
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    for (const h of hunk) out.push((h.kind === "same" ? " " : h.kind === "added" ? "+" : "-") + h.line);
    i = end;
  }
  return out.join("\n") + "\n";
}
