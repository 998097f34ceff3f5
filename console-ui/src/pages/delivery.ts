// Placeholder: the console-watch helper builds this page.
import { h } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";

export function mount(root: HTMLElement, ctx: PageContext): void {
  root.append(h("h1", null, "Delivery"), h("p", { class: "muted" }, "Coming soon for store ", ctx.storeId, "."));
}
