// One plugin: the editor and the test bench (filled in by the editor step).
import { h } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";

export function mount(root: HTMLElement, ctx: PageContext): void {
  root.append(h("h1", null, ctx.params.name ?? ""));
}
