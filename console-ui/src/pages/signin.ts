// Sign-in: a console login (e-mail and password) or the admin token.
import { ApiError, api, setSession, type Session } from "../lib/api.ts";
import { h } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";

export function mount(root: HTMLElement, ctx: PageContext): void {
  const params = new URLSearchParams(location.search);
  const next = params.get("next");
  const target = next !== null && next.startsWith("/console/") && !next.startsWith("/console/signin") ? next : "/console";
  const message = h("p", { class: "error", role: "alert", "data-testid": "signin-error" });
  if (params.get("expired") === "1") message.textContent = "Your session has ended: sign in again.";

  const submit = async (body: Record<string, string>, button: HTMLButtonElement) => {
    button.disabled = true;
    message.textContent = "";
    try {
      setSession(await api<Session>("POST", "/console/api/session", body));
      ctx.navigate(target);
    } catch (err) {
      message.textContent = err instanceof ApiError ? err.message : String(err);
    } finally {
      button.disabled = false;
    }
  };

  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const loginButton = h("button", { type: "submit" }, "Sign in");
  const token = h("input", { type: "password", name: "token", autocomplete: "off", required: true });
  const tokenButton = h("button", { type: "submit" }, "Sign in with the admin token");

  root.append(
    h(
      "div",
      { class: "signin" },
      h("h1", null, "storefront console"),
      message,
      h(
        "form",
        {
          "data-testid": "signin-login",
          on: {
            submit: (e) => {
              e.preventDefault();
              void submit({ email: email.value, password: password.value }, loginButton);
            },
          },
        },
        h("label", null, "E-mail", email),
        h("label", null, "Password", password),
        loginButton,
      ),
      h("p", { class: "muted" }, "or"),
      h(
        "form",
        {
          "data-testid": "signin-token",
          on: {
            submit: (e) => {
              e.preventDefault();
              void submit({ token: token.value }, tokenButton);
            },
          },
        },
        h("label", null, "Admin token", token),
        tokenButton,
      ),
      h("p", { class: "muted" }, "A login is created by the operator: ", h("code", null, "storefront console users add <email> --store <id>")),
    ),
  );
  email.focus();
}
