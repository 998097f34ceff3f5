// A table filled a page at a time from a cursor-paged admin list: a fresh load (new filters) starts over,
// "Older …" appends the next page, and an answer that arrives after a newer load, or after the page was
// left, is dropped.
import { api } from "./api.ts";
import { h, replace } from "./dom.ts";

export interface Paged<T> {
  data: T[];
  pagination: { limit: number; nextCursor: string | null };
}

export interface PagedListOptions<T> {
  body: HTMLElement;
  status: HTMLElement;
  /** Label of the button that loads the next page. */
  moreLabel: string;
  /** The admin path of a page: the first (cursor null) or the one after `cursor`. */
  path: (cursor: string | null) => string;
  row: (item: T) => Node | Node[];
  /** Shown when a fresh load finds nothing. */
  empty: string;
  onError: (err: unknown) => void;
}

export interface PagedList {
  /** The "Older …" button, hidden while there is no next page. */
  more: HTMLButtonElement;
  load(fresh: boolean): Promise<void>;
  /** The page is left: answers still on their way are dropped. */
  stop(): void;
}

export function pagedList<T>(o: PagedListOptions<T>): PagedList {
  let nextCursor: string | null = null;
  let generation = 0;
  let stopped = false;
  const more = h("button", { type: "button", class: "secondary", hidden: true, on: { click: () => void load(false) } }, o.moreLabel);

  async function load(fresh: boolean): Promise<void> {
    const mine = fresh ? ++generation : generation;
    if (fresh) {
      replace(o.body);
      nextCursor = null;
    }
    o.status.textContent = "Loading…";
    try {
      const page = await api<Paged<T>>("GET", o.path(nextCursor));
      if (mine !== generation || stopped) return;
      for (const item of page.data) {
        const row = o.row(item);
        o.body.append(...(Array.isArray(row) ? row : [row]));
      }
      nextCursor = page.pagination.nextCursor;
      more.hidden = nextCursor === null;
      o.status.textContent = o.body.children.length === 0 ? o.empty : "";
    } catch (err) {
      if (mine === generation && !stopped) o.onError(err);
    }
  }

  return {
    more,
    load,
    stop: () => {
      stopped = true;
      generation++;
    },
  };
}
