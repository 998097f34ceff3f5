// What every page gets: console-ui/src/pages/<name>.ts exports mount(root, ctx), which may return a
// clean-up (timers, streams) that runs when the page is left.

export interface PageContext {
  storeId: string;
  params: Record<string, string>;
  navigate(path: string): void;
}

export type Cleanup = () => void;

export type Mount = (root: HTMLElement, ctx: PageContext) => void | Cleanup;
