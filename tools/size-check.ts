// The house's size rule: no file over 400 lines and no function over 80, unless the file says why at its
// top (a line `// size: <reason>` in its leading comment). A factory that returns an object of methods
// (`createXService`) is a class in closure form: its methods are the functions measured, not the factory.
// Prints what is over; exits 1 when anything is. CI runs it (npm run lint).
//   node tools/size-check.ts [dir ...]   (default: src tools console-ui/src)
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
const roots = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["src", "tools", "console-ui/src"];

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) yield* files(full);
    else if (/\.(ts|lua)$/.test(name)) yield full;
  }
}

/** The function's last statement returns an object literal with methods: a factory, measured by its methods. */
function isFactory(node: ts.FunctionLikeDeclaration): boolean {
  const body = node.body;
  if (body === undefined || !ts.isBlock(body)) return false;
  const last = body.statements[body.statements.length - 1];
  if (last === undefined || !ts.isReturnStatement(last) || last.expression === undefined) return false;
  let e = last.expression;
  while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) e = e.expression;
  if (!ts.isObjectLiteralExpression(e)) return false;
  return e.properties.some((p) => ts.isMethodDeclaration(p) || (ts.isPropertyAssignment(p) && (ts.isArrowFunction(p.initializer) || ts.isFunctionExpression(p.initializer))));
}

const problems: string[] = [];
for (const root of roots) {
  for (const file of files(root)) {
    const text = readFileSync(file, "utf8");
    const lines = text.split("\n").length;
    const header = text.split("\n").filter((l, i) => i < 30 && /^(\/\/|--)/.test(l.trim()));
    if (header.some((l) => /^(\/\/|--)\s*size:/.test(l.trim()))) continue;
    // A migration is frozen the day it ships: its size is history, not design.
    if (file.includes(`${path.sep}migrations${path.sep}`)) continue;
    if (lines > MAX_FILE_LINES) problems.push(`${file}: ${lines} lines (over ${MAX_FILE_LINES})`);
    if (!file.endsWith(".ts")) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node)) {
        const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const name = ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) ? (node.name?.getText() ?? "(anonymous)") : "(function)";
        if (end - start + 1 > MAX_FUNCTION_LINES && !isFactory(node)) problems.push(`${file}:${start + 1}: ${name} is ${end - start + 1} lines (over ${MAX_FUNCTION_LINES})`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}
for (const p of problems) console.log(p);
process.exitCode = problems.length > 0 ? 1 : 0;
