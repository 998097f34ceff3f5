// Lint: type-aware rules that catch the bugs a service cannot afford
// (floating promises, non-exhaustive switches), on top of the recommended sets.
import js from "@eslint/js";
import boundaries from "eslint-plugin-boundaries";
import tseslint from "typescript-eslint";

// The house's folders and which may import which (docs/architecture.md draws the same picture). Every
// arrow points down, so no two folders can import each other; `platform/` and `lib/` know no domain; a
// migration imports nothing but kysely and its own context type: it is frozen the day it ships.
const FOLDERS = [
  // [element, files, may import]
  ["lib", "src/lib", ["errors"]],
  ["errors", "src/errors.ts", []],
  ["migrations", "src/platform/db/migrations", []],
  ["platform-db", "src/platform/db", ["lib", "errors", "migrations"]],
  ["platform-crypto", "src/platform/crypto", ["lib", "errors", "platform-db"]],
  ["platform-outbound", "src/platform/outbound", ["lib", "errors"]],
  ["platform-ops", "src/platform/ops", ["lib", "errors", "platform-db"]],
  ["schemas", "src/schemas", ["lib", "errors"]],
  ["sandbox", "src/sandbox", ["lib", "errors", "platform-outbound", "platform-ops"]],
  ["config", "src/config.ts", ["lib", "errors", "platform-db", "platform-outbound", "platform-ops", "sandbox"]],
];
const BASE = ["lib", "errors", "config", "schemas", "platform-db", "platform-crypto", "platform-outbound", "platform-ops"];
const DOMAINS = [
  ["versioning", []],
  ["stores", ["versioning"]],
  ["auth", ["stores", "versioning"]],
  ["plugins", ["sandbox", "stores", "versioning", "auth"]],
  ["events", ["stores", "versioning", "auth"]],
  ["readmodel", ["stores", "versioning", "auth"]],
  ["invoices", ["events", "readmodel", "stores", "versioning", "auth"]],
  ["customers", ["invoices", "readmodel", "stores", "versioning", "auth"]],
  ["payments", ["sandbox", "plugins", "events", "invoices", "readmodel", "stores", "versioning", "auth"]],
  ["console", ["sandbox", "plugins", "events", "invoices", "readmodel", "payments", "stores", "versioning", "auth"]],
  ["admin", ["sandbox", "plugins", "events", "invoices", "customers", "readmodel", "payments", "console", "stores", "versioning", "auth"]],
  ["seed", ["invoices", "customers", "readmodel", "stores"]],
];
const DOMAIN_NAMES = DOMAINS.map(([name]) => name);
// Folders match as folders (the first descriptor that matches wins: migrations before platform/db). The
// three single files at src/'s root are elements of their own, which needs the plugin's (deprecated)
// file mode: it warns once per run.
const SINGLE_FILES = new Set(["errors", "config"]);
const ELEMENTS = [
  ...FOLDERS.map(([type, pattern]) => (SINGLE_FILES.has(type) ? { type, pattern, mode: "file" } : { type, pattern, partialMatch: false })),
  ...DOMAINS.map(([type]) => ({ type, pattern: `src/${type}`, partialMatch: false })),
  { type: "app", pattern: "src/{app,services,main,followers}.ts", mode: "file" },
  { type: "cli", pattern: "src/cli", partialMatch: false },
  { type: "tools", pattern: "tools", partialMatch: false },
];
const ALLOW = [
  ...FOLDERS.map(([type, , allowed]) => [type, allowed]),
  ...DOMAINS.map(([type, allowed]) => [type, [...BASE, ...allowed]]),
  ["app", [...BASE, "sandbox", ...DOMAIN_NAMES, "app", "cli", "tools"]],
  ["cli", [...BASE, "sandbox", ...DOMAIN_NAMES, "app", "tools"]],
  ["tools", [...BASE, "sandbox", ...DOMAIN_NAMES, "app"]],
];

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
    files: ["src/**/*.ts", "tools/**/*.ts"],
    plugins: { boundaries },
    settings: {
      "boundaries/elements": ELEMENTS,
      "boundaries/include": ["src/**/*.ts", "tools/**/*.ts"],
      "import/resolver": { node: { extensions: [".ts", ".js"] } },
    },
    rules: {
      "boundaries/dependencies": [
        "error",
        {
          default: "disallow",
          policies: [
            // A folder's own files import each other freely; between folders only the arrows above.
            ...ALLOW.map(([type, allowed]) => ({ from: { element: { type } }, allow: { to: { element: { types: { anyOf: [type, ...allowed] } } } } })),
          ],
        },
      ],
    },
  },
  {
    files: ["eslint.config.js"],
    rules: { "no-restricted-syntax": "off" },
  },
);
