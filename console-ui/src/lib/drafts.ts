// Unsaved plugin source kept in this browser (localStorage), per store, plugin and the version it was
// based on, so that nothing typed is lost when a session ends, a page is left or the browser closes. A
// draft goes once it is saved (or matches what is saved); the newest is offered back when the plugin opens.

export interface Draft {
  storeId: string;
  plugin: string;
  baseVersion: number;
  source: string;
  /** Epoch ms of the last keystroke kept. */
  at: number;
}

const PREFIX = "storefront.draft:";
const key = (storeId: string, plugin: string, baseVersion: number) => `${PREFIX}${JSON.stringify([storeId, plugin, baseVersion])}`;

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null; // storage disabled: drafts are not kept, everything else works
  }
}

export function saveDraft(d: Draft): void {
  try {
    storage()?.setItem(key(d.storeId, d.plugin, d.baseVersion), JSON.stringify(d));
  } catch {
    // quota exceeded: the editor still holds the text
  }
}

export function dropDraft(storeId: string, plugin: string, baseVersion: number): void {
  storage()?.removeItem(key(storeId, plugin, baseVersion));
}

/** Every draft of the plugin, newest first. */
export function draftsOf(storeId: string, plugin: string): Draft[] {
  const s = storage();
  if (s === null) return [];
  const out: Draft[] = [];
  for (let i = 0; i < s.length; i++) {
    const k = s.key(i);
    if (k === null || !k.startsWith(PREFIX)) continue;
    try {
      const d = JSON.parse(s.getItem(k) ?? "null") as Draft | null;
      if (d && d.storeId === storeId && d.plugin === plugin && typeof d.source === "string") out.push(d);
    } catch {
      // not ours
    }
  }
  return out.sort((a, b) => b.at - a.at);
}
