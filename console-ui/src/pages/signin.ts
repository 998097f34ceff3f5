// Sign-in: a console login (e-mail and password) or the admin token.
import { h } from "../lib/dom.ts";
import type { PageContext } from "../lib/page.ts";
import { signinForms } from "../lib/signin-form.ts";

export function mount(root: HTMLElement, ctx: PageContext): void {
  const params = new URLSearchParams(location.search);
  const next = params.get("next");
  const target = next !== null && next.startsWith("/console/") && !next.startsWith("/console/signin") ? next : "/console";
  const forms = signinForms(() => ctx.navigate(target), "signin");
  if (params.get("expired") === "1") forms.message.textContent = "Your session has ended: sign in again.";
  root.append(
    h(
      "div",
      { class: "signin" },
      h("h1", null, "storefront console"),
      forms.root,
      h("p", { class: "muted" }, "A login is created by the operator: ", h("code", null, "storefront console users add <email> --store <id>")),
    ),
  );
  forms.focus();
}
