// The login page: checks the token against the server (a 401 means it is not accepted) before keeping it in
// this tab's session storage, then returns to the console page that asked for it.

import * as api from "./api.js";

const form = document.getElementById("login-form");
const input = document.getElementById("token");
const error = document.getElementById("login-error");
const reason = document.getElementById("login-reason");
const open = document.getElementById("login-open");
const button = document.getElementById("sign-in");

/** Why the console sent the browser here, by code: the page shows only its own words, never text from the URL. */
const REASONS = {
  rejected: "The server no longer accepts the token this tab had: sign in again.",
};

function showReason() {
  const code = new URLSearchParams(window.location.search).get("reason");
  const text = code && Object.hasOwn(REASONS, code) ? REASONS[code] : null;
  if (text) {
    reason.textContent = text;
    reason.hidden = false;
  }
}

async function showWhetherOpen() {
  const probe = await api.probe(null);
  open.hidden = probe.outcome !== "ok";
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = input.value.trim();
  error.textContent = "";
  if (!token) {
    error.textContent = "Enter a token.";
    input.setAttribute("aria-invalid", "true");
    input.focus();
    return;
  }
  button.disabled = true;
  const probe = await api.probe(token);
  button.disabled = false;
  if (probe.outcome === "ok") {
    api.setToken(token);
    window.location.replace(`/ui/${api.takeReturn()}`);
    return;
  }
  input.setAttribute("aria-invalid", "true");
  error.textContent =
    probe.outcome === "unauthorized"
      ? `The server did not accept this token (${probe.error.code}).`
      : `The server could not check the token: ${probe.error.message}`;
  input.focus();
});

input.addEventListener("input", () => input.removeAttribute("aria-invalid"));

showReason();
showWhetherOpen();
input.focus();
