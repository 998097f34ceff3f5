// The CodeMirror pieces of the plugin page: the Lua editor (highlighting in the page's colour scheme,
// completion of the sandbox's globals and of Lua's keywords, compile errors as you type) and the read-only
// diff of two sources with unchanged code collapsed.
//
// CodeMirror adds its styles with a <style> element in a document, which the console's CSP (style-src
// 'self') blocks; inside a shadow root it uses a constructed style sheet (adoptedStyleSheets), which the CSP
// allows. So each editor lives in a shadow root: no nonce needed. Its colours are the page's CSS variables
// (they inherit into the shadow root), so dark mode needs no second theme.
import { autocompletion, type Completion, type CompletionContext, type CompletionResult } from "@codemirror/autocomplete";
import { HighlightStyle, StreamLanguage, syntaxHighlighting } from "@codemirror/language";
import { lua } from "@codemirror/legacy-modes/mode/lua";
import { type Diagnostic, linter, lintGutter } from "@codemirror/lint";
import { MergeView } from "@codemirror/merge";
import { EditorState, type Extension } from "@codemirror/state";
import { EditorView, keymap } from "@codemirror/view";
import { tags } from "@lezer/highlight";
import { basicSetup } from "codemirror";

export interface Global {
  label: string;
  type: string;
  detail: string;
  info: string;
}

export const LUA_KEYWORDS = ["and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"];

/**
 * Completion by prefix only (CodeMirror's fuzzy match let "end" pick json.encode, and Enter accepted it):
 * the sandbox's globals and Lua's keywords whose name starts with what was typed. A word that is already a
 * whole keyword or global offers nothing, so Enter after `end` starts a new line.
 */
export function completionSource(list: Global[]) {
  const options: Completion[] = [
    ...LUA_KEYWORDS.map((k): Completion => ({ label: k, type: "keyword" })),
    ...list.map((g): Completion => ({ label: g.label, type: g.type === "namespace" ? "namespace" : g.type, detail: g.detail, info: g.info })),
  ];
  return (context: CompletionContext): CompletionResult | null => {
    const word = context.matchBefore(/[\w.]*/);
    if (!word || (word.from === word.to && !context.explicit)) return null;
    const typed = word.text;
    if (options.some((o) => o.label === typed) && !context.explicit) return null;
    const matching = options.filter((o) => o.label.startsWith(typed) && o.label !== typed);
    if (matching.length === 0) return null;
    return { from: word.from, options: matching, filter: false };
  };
}

const highlight = HighlightStyle.define([
  { tag: tags.keyword, color: "var(--syn-keyword)", fontWeight: "600" },
  { tag: [tags.string, tags.special(tags.string)], color: "var(--syn-string)" },
  { tag: [tags.number, tags.bool, tags.null], color: "var(--syn-number)" },
  { tag: tags.comment, color: "var(--syn-comment)", fontStyle: "italic" },
  { tag: [tags.variableName, tags.propertyName], color: "var(--fg)" },
  { tag: [tags.operator, tags.punctuation, tags.bracket], color: "var(--fg)" },
]);

const MONO = 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace';
const baseTheme = EditorView.theme({
  "&": { backgroundColor: "var(--panel)", color: "var(--fg)", fontSize: "13px" },
  ".cm-scroller": { fontFamily: MONO },
  ".cm-gutters": { backgroundColor: "var(--bg)", color: "var(--muted)", borderRight: "1px solid var(--line)" },
  ".cm-activeLine": { backgroundColor: "var(--active-line)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--active-line)" },
  "&.cm-focused .cm-cursor": { borderLeftColor: "var(--fg)" },
  "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection": { backgroundColor: "var(--selection)" },
  ".cm-tooltip": { backgroundColor: "var(--panel)", color: "var(--fg)", border: "1px solid var(--line)" },
  ".cm-tooltip-autocomplete ul li[aria-selected]": { backgroundColor: "var(--accent)", color: "#fff" },
  ".cm-panels": { backgroundColor: "var(--panel)", color: "var(--fg)" },
  ".cm-collapsedLines": { backgroundColor: "var(--bg)", color: "var(--muted)" },
  ".cm-changedLine": { backgroundColor: "var(--diff-changed)" },
  ".cm-deletedChunk": { backgroundColor: "var(--diff-deleted)" },
  ".cm-insertedLine, .cm-changedText": { backgroundColor: "var(--diff-inserted)" },
});

function shadowHost(host: HTMLElement): ShadowRoot {
  return host.shadowRoot ?? host.attachShadow({ mode: "open" });
}

const common = (label: string): Extension[] => [basicSetup, StreamLanguage.define(lua), syntaxHighlighting(highlight), baseTheme, EditorState.tabSize.of(2), EditorView.contentAttributes.of({ "aria-label": label })];

export interface EditorOptions {
  doc: string;
  globals: Global[];
  check: (source: string) => Promise<Diagnostic[]>;
  onChange: (source: string) => void;
  /** Ctrl+S / Cmd+S. */
  onSave: () => void;
}

export function createEditor(host: HTMLElement, o: EditorOptions): EditorView {
  const shadow = shadowHost(host);
  return new EditorView({
    parent: shadow,
    root: shadow,
    state: EditorState.create({
      doc: o.doc,
      extensions: [
        keymap.of([{ key: "Mod-s", preventDefault: true, run: () => (o.onSave(), true) }]),
        ...common("Plugin source (Lua)"),
        EditorView.theme({ "&": { height: "var(--editor-height)" } }),
        autocompletion({ override: [completionSource(o.globals)] }),
        lintGutter(),
        linter((v) => o.check(v.state.doc.toString()), { delay: 400 }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) o.onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
}

/**
 * Two sources side by side, unchanged code collapsed. Read-only but focusable (a reader scrolls it with the
 * keyboard, and assistive technology names each pane).
 */
export function diffView(host: HTMLElement, left: { doc: string; label: string }, right: { doc: string; label: string }): MergeView {
  const shadow = shadowHost(host);
  const pane = (label: string) => [...common(label), EditorState.readOnly.of(true)];
  return new MergeView({
    a: { doc: left.doc, extensions: pane(left.label) },
    b: { doc: right.doc, extensions: pane(right.label) },
    parent: shadow,
    root: shadow,
    collapseUnchanged: { margin: 3, minSize: 4 },
    gutter: true,
  });
}
