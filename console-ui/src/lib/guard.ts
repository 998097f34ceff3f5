// The guard on leaving a page with unsaved work: the page registers what it would lose; an in-app
// navigation asks first, and closing or reloading the tab gets the browser's own question.

let pending: (() => string | null) | null = null;

/** `check` says what would be lost (null: nothing); null clears the guard. */
export function setLeaveGuard(check: (() => string | null) | null): void {
  pending = check;
}

/** True when the page may be left (nothing unsaved, or the merchant said so). */
export function mayLeave(): boolean {
  const what = pending?.();
  if (what === null || what === undefined) return true;
  return window.confirm(`${what}\n\nLeave this page anyway? A draft stays in this browser and is offered back when you return.`);
}

window.addEventListener("beforeunload", (event) => {
  if (pending?.() != null) event.preventDefault();
});
