// The two ways to sign in (a console login, or the admin token), shared by the sign-in page and the dialog
// that signs in again in place when a session ends while the merchant works.
import { ApiError, api, setSession, type Session } from "./api.ts";
import { h } from "./dom.ts";

/** Both forms; `onSignedIn` runs after a new session is open. */
export function signinForms(onSignedIn: () => void, idPrefix: string): { root: HTMLElement; focus(): void; message: HTMLElement } {
  const message = h("p", { class: "error", role: "alert", "data-testid": "signin-error" });
  const submit = async (body: Record<string, string>, button: HTMLButtonElement) => {
    button.disabled = true;
    message.textContent = "";
    try {
      setSession(await api<Session>("POST", "/console/api/session", body));
      onSignedIn();
    } catch (err) {
      message.textContent = err instanceof ApiError ? err.message : String(err);
    } finally {
      button.disabled = false;
    }
  };
  const email = h("input", { type: "email", name: "email", id: `${idPrefix}-email`, autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", id: `${idPrefix}-password`, autocomplete: "current-password", required: true });
  const loginButton = h("button", { type: "submit" }, "Sign in");
  const token = h("input", { type: "password", name: "token", id: `${idPrefix}-token`, autocomplete: "off", required: true });
  const tokenButton = h("button", { type: "submit" }, "Sign in with the admin token");
  const root = h(
    "div",
    null,
    message,
    h(
      "form",
      { "data-testid": "signin-login", on: { submit: (e) => (e.preventDefault(), void submit({ email: email.value, password: password.value }, loginButton)) } },
      h("label", null, "E-mail", email),
      h("label", null, "Password", password),
      loginButton,
    ),
    h("p", { class: "muted" }, "or"),
    h("form", { "data-testid": "signin-token", on: { submit: (e) => (e.preventDefault(), void submit({ token: token.value }, tokenButton)) } }, h("label", null, "Admin token", token), tokenButton),
  );
  return { root, focus: () => email.focus(), message };
}

let open: Promise<boolean> | null = null;

/** A modal over the page: resolves true once signed in again, false when dismissed. One at a time. */
export function signInAgain(): Promise<boolean> {
  open ??= new Promise<boolean>((resolve) => {
    const dialog = h("dialog", { class: "signin-dialog", "aria-labelledby": "reauth-title", "data-testid": "reauth-dialog" });
    const done = (ok: boolean) => {
      open = null;
      dialog.close();
      dialog.remove();
      resolve(ok);
    };
    const forms = signinForms(() => done(true), "reauth");
    dialog.append(
      h("h2", { id: "reauth-title" }, "Your session has ended"),
      h("p", null, "Sign in again to go on. Nothing you typed is lost: the page stays as it is."),
      forms.root,
      h("button", { type: "button", class: "secondary", on: { click: () => done(false) } }, "Cancel"),
    );
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    forms.focus();
  });
  return open;
}
