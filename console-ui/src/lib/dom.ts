// The one way the console builds DOM: h(tag, attrs, ...children). Text is always a text node (never
// parsed as HTML), event handlers are functions (never strings), and a URL attribute is kept only when
// it is http(s) or relative. Everything from outside (bodies, headers, logs) goes through here.

export type Child = Node | string | number | boolean | null | undefined | Child[];

type Handler = (event: Event) => void;

export interface Attrs {
  /** Event listeners: functions only. */
  on?: Partial<Record<keyof HTMLElementEventMap, Handler>>;
  /** Set as DOM properties, not attributes (form controls' current state). */
  value?: string;
  checked?: boolean;
  selected?: boolean;
  [attribute: string]: string | number | boolean | null | undefined | Attrs["on"];
}

const URL_ATTRIBUTES = new Set(["href", "src", "action", "formaction", "xlink:href", "poster", "cite"]);
const FORBIDDEN_ATTRIBUTES = new Set(["style", "srcdoc"]);

/** http(s) or a path on this site; anything else (javascript:, data:, protocol-relative //) is refused. */
export function isSafeUrl(url: string): boolean {
  const u = url.trim();
  if (/^https?:\/\//i.test(u)) return true;
  return (u.startsWith("/") && !u.startsWith("//") && !u.startsWith("/\\")) || u.startsWith("#") || u.startsWith("?");
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (name === "on") {
        for (const [type, fn] of Object.entries(value as NonNullable<Attrs["on"]>)) if (typeof fn === "function") el.addEventListener(type, fn);
        continue;
      }
      if (value === null || value === undefined || value === false) continue;
      if (name === "value" || name === "checked" || name === "selected") {
        (el as unknown as Record<string, unknown>)[name] = value;
        continue;
      }
      const lower = name.toLowerCase();
      if (lower.startsWith("on") || FORBIDDEN_ATTRIBUTES.has(lower) || !/^[a-z][a-z0-9:-]*$/.test(lower)) throw new Error(`h(): attribute ${name} is not allowed`);
      const text = value === true ? "" : String(value);
      if (URL_ATTRIBUTES.has(lower) && !isSafeUrl(text)) continue;
      el.setAttribute(lower, text);
    }
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false || child === true) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Removes every child of `el`. */
export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** Replaces the children of `el`. */
export function replace(el: Node, ...children: Child[]): void {
  clear(el);
  append(el, children);
}

export const fmtTime = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "—");
