// Copy buttons: each names what it copies (unique, for screen readers and tests), and says "Copied".
import { h } from "./dom.ts";

export function copyButton(what: string, text: () => string): HTMLButtonElement {
  const button = h(
    "button",
    {
      type: "button",
      class: "secondary copy",
      "aria-label": `Copy ${what}`,
      title: `Copy ${what}`,
      "data-copy": what,
      on: {
        click: () => {
          void navigator.clipboard
            .writeText(text())
            .then(() => {
              button.textContent = "Copied";
              setTimeout(() => (button.textContent = "Copy"), 1500);
            })
            .catch(() => (button.textContent = "Copy failed"));
        },
      },
    },
    "Copy",
  );
  return button;
}

/** A value in monospace with its copy button. */
export function copyable(what: string, value: string, attrs: Record<string, string> = {}): HTMLSpanElement {
  return h("span", { class: "copyable", ...attrs }, h("code", { class: "wrap" }, value), " ", copyButton(what, () => value));
}
