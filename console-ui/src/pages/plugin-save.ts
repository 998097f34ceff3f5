// Saving deploys to live traffic at once, so a save is a deploy step: the diff against the live version
// (unchanged code collapsed), an optional note, then the save naming the version it was based on. A save
// refused because another version went live meanwhile (409 version_conflict) opens the conflict view: the
// live version beside the merchant's edit, to save on top of it or to take it into the editor.
import { ApiError, api } from "../lib/api.ts";
import { h } from "../lib/dom.ts";
import { diffView } from "./plugin-editor.ts";

export interface SaveAnswer {
  name: string;
  version: number;
  enabled: boolean;
  reused: boolean;
}

export interface SaveFlow {
  pluginPath: string;
  /** The version the editor's text was based on, and its source (what is live unless another tab saved). */
  base: () => { version: number; source: string };
  edited: () => string;
  onSaved: (answer: SaveAnswer, base: number) => void;
  /** The merchant chose to edit on top of the live version: its source and number replace the base. */
  onTakeLive: (live: { version: number; source: string }) => void;
  onError: (err: unknown) => void;
}

function modal(testid: string, title: string, ...content: (Node | string)[]): HTMLDialogElement {
  const dialog = h("dialog", { class: "wide-dialog", "data-testid": testid, "aria-labelledby": `${testid}-title` }, h("h2", { id: `${testid}-title` }, title), ...content);
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

async function put(flow: SaveFlow, baseVersion: number, note: string): Promise<void> {
  const answer = await api<SaveAnswer>("PUT", flow.pluginPath, { source: flow.edited(), baseVersion, ...(note.trim() === "" ? {} : { note: note.trim() }) });
  flow.onSaved(answer, baseVersion);
}

/** The deploy step: diff against live, note, save. */
export function openDeploy(flow: SaveFlow): void {
  const base = flow.base();
  const note = h("input", { type: "text", name: "note", maxlength: 500, placeholder: "what changed, and why (optional)", "data-testid": "deploy-note" });
  const diffHost = h("div", { class: "editor diff", "data-testid": "deploy-diff" });
  const identical = base.source === flow.edited();
  const confirm = h("button", { type: "submit", "data-testid": "deploy-confirm" }, identical ? "Save anyway" : "Deploy as new version");
  const dialog = modal(
    "deploy",
    `Deploy over version ${base.version}`,
    h("p", null, identical ? "Your text is the same as the live version: nothing would change." : "Live traffic runs the new version as soon as it is saved. Changes against the live version:"),
    diffHost,
    h(
      "form",
      {
        method: "dialog",
        on: {
          submit: (e: Event) => {
            e.preventDefault();
            confirm.disabled = true;
            put(flow, base.version, note.value)
              .then(() => dialog.close())
              .catch((err: unknown) => {
                dialog.close();
                if (err instanceof ApiError && err.code === "version_conflict") void openConflict(flow, err);
                else flow.onError(err);
              });
          },
        },
      },
      h("label", null, "Note", note),
      h("div", { class: "toolbar" }, confirm, h("button", { type: "button", class: "secondary", on: { click: () => dialog.close() } }, "Cancel")),
    ),
  );
  const view = diffView(diffHost, { doc: base.source, label: `Live version ${base.version}` }, { doc: flow.edited(), label: "Your edit" });
  dialog.addEventListener("close", () => view.destroy());
  note.focus();
}

/** Another version went live since the editor's base: show it beside the edit, and let the merchant choose. */
export async function openConflict(flow: SaveFlow, err: ApiError): Promise<void> {
  const liveVersion = Number(err.details.currentVersion);
  if (!Number.isInteger(liveVersion)) {
    flow.onError(err);
    return;
  }
  const live = await api<{ version: number; source: string }>("GET", `${flow.pluginPath}/versions/${liveVersion}`);
  const diffHost = h("div", { class: "editor diff", "data-testid": "conflict-diff" });
  const note = h("input", { type: "text", name: "note", maxlength: 500, placeholder: "optional note", "aria-label": "Note" });
  const dialog = modal(
    "conflict",
    "Someone saved another version meanwhile",
    h(
      "p",
      { role: "alert" },
      `You started from version ${flow.base().version}; version ${liveVersion} is live now. Left: version ${liveVersion}. Right: your edit. Saving yours replaces what version ${liveVersion} changed unless you carry it over.`,
    ),
    diffHost,
    h(
      "div",
      { class: "toolbar" },
      note,
      h(
        "button",
        {
          type: "button",
          "data-testid": "conflict-save-mine",
          on: {
            click: () => {
              put(flow, liveVersion, note.value)
                .then(() => dialog.close())
                .catch((e: unknown) => {
                  dialog.close();
                  flow.onError(e);
                });
            },
          },
        },
        `Save mine over version ${liveVersion}`,
      ),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "data-testid": "conflict-take-live",
          on: {
            click: () => {
              flow.onTakeLive(live);
              dialog.close();
            },
          },
        },
        `Load version ${liveVersion} into the editor`,
      ),
      h("button", { type: "button", class: "secondary", on: { click: () => dialog.close() } }, "Keep editing"),
    ),
  );
  const view = diffView(diffHost, { doc: live.source, label: `Live version ${liveVersion}` }, { doc: flow.edited(), label: "Your edit" });
  dialog.addEventListener("close", () => view.destroy());
}
