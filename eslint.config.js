// Lint: type-aware rules that catch the bugs a service cannot afford
// (floating promises, non-exhaustive switches), on top of the recommended sets.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "data/", "dist/", "coverage/", "bench/results/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        // node:test's test()/describe() return promises the runner itself awaits.
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["test", "describe", "it", "suite", "before", "after"] }] },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": ["error", { selector: "ExportDefaultDeclaration", message: "Named exports only." }],
    },
  },
  {
    // The console renders strangers' data (delivery bodies, headers, logs): text nodes only, via lib/dom.ts's h().
    files: ["console-ui/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "ExportDefaultDeclaration", message: "Named exports only." },
        { selector: "MemberExpression[property.name=/^(innerHTML|outerHTML)$/]", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { selector: "CallExpression[callee.property.name=/^(insertAdjacentHTML|createContextualFragment|setHTMLUnsafe|parseHTMLUnsafe)$/]", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { selector: "CallExpression[callee.object.name='document'][callee.property.name=/^(write|writeln)$/]", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { selector: "CallExpression[callee.property.name='setAttribute'][arguments.0.value=/^on|^style$|^href$|^src$/i]", message: "Event handlers, styles and URLs go through h() from lib/dom.ts." },
      ],
      "no-restricted-properties": [
        "error",
        { property: "innerHTML", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { property: "outerHTML", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { property: "insertAdjacentHTML", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { object: "document", property: "write", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
        { object: "document", property: "writeln", message: "Never parse HTML: build nodes with h() from lib/dom.ts." },
      ],
    },
  },
  {
    files: ["eslint.config.js"],
    rules: { "no-restricted-syntax": "off" },
  },
);
