// The console's shell: sign-in state, the scope form, routing by URL fragment (an ARM id), and the refresh
// loop that keeps a page live — every second while an operation runs, every five seconds otherwise — redrawing
// only when the data changed and keeping focus and open disclosures across redraws.

import * as api from "./api.js";
import { errorBlock, h } from "./dom.js";
import { parseRoute, routeHref } from "./model.js";
import { pages } from "./views.js";

const BUSY_REFRESH_MS = 1000;
const IDLE_REFRESH_MS = 5000;
const SCOPE_KEY = "cairn.console.scope";

const main = document.getElementById("main");
const breadcrumbs = document.getElementById("breadcrumbs");
const announcer = document.getElementById("announcer");
const scopeForm = document.getElementById("scope-form");
const scopeInput = document.getElementById("scope-input");
const scopeError = document.getElementById("scope-error");
const session = document.getElementById("session");
const updated = document.getElementById("updated");

let generation = 0;
let current = null;

function announce(text) {
  if (text) {
    announcer.textContent = text;
  }
}

/** Forgets the token and goes to the login page; `reason` is one of the login page's reason codes, or none. */
function signOut(reason) {
  api.clearToken();
  api.rememberReturn(window.location.hash);
  window.location.replace(reason ? `/ui/login?reason=${reason}` : "/ui/login");
}

function renderSession(open) {
  const parts = open
    ? [h("span", { class: "muted" }, "No sign-in: this server accepts requests without a token.")]
    : [
        h("span", { class: "muted" }, "Signed in with a token"),
        " ",
        h("button", { type: "button", id: "sign-out", on: { click: () => signOut(null) } }, "Sign out"),
      ];
  session.replaceChildren(...parts);
}

/** What identifies an element across redraws: an explicit key, its id, or the link it is. */
function focusKey(element) {
  if (!element || element === document.body || !main.contains(element)) {
    return null;
  }
  if (element.dataset && element.dataset.focusKey) {
    return `key:${element.dataset.focusKey}`;
  }
  if (element.id) {
    return `id:${element.id}`;
  }
  const href = element.getAttribute && element.getAttribute("href");
  return href ? `href:${href}` : null;
}

function findByFocusKey(key) {
  if (!key) {
    return null;
  }
  const [kind, value] = [key.slice(0, key.indexOf(":")), key.slice(key.indexOf(":") + 1)];
  const candidates = main.querySelectorAll(kind === "key" ? "[data-focus-key]" : kind === "id" ? "[id]" : "[href]");
  for (const candidate of candidates) {
    const own = kind === "key" ? candidate.dataset.focusKey : kind === "id" ? candidate.id : candidate.getAttribute("href");
    if (own === value) {
      return candidate;
    }
  }
  return null;
}

function crumbsFor(route) {
  const items = [];
  if (route.subscription) {
    items.push([`/subscriptions/${route.subscription}`, `Subscription ${route.subscription}`]);
  }
  if (route.resourceGroup) {
    items.push([`/subscriptions/${route.subscription}/resourceGroups/${route.resourceGroup}`, `Resource group ${route.resourceGroup}`]);
  }
  if (route.managementGroup) {
    items.push([`/providers/Microsoft.Management/managementGroups/${route.managementGroup}`, `Management group ${route.managementGroup}`]);
  }
  if (route.kind === "stack") {
    items.push([route.id, `Stack ${route.name}`]);
  } else if (route.kind === "deployment") {
    items.push([route.id, `Deployment ${route.name}`]);
  }
  return h(
    "ol",
    null,
    items.map(([id, text], index) =>
      h("li", null, index === items.length - 1 ? h("a", { href: routeHref(id), "aria-current": "page" }, text) : h("a", { href: routeHref(id) }, text)),
    ),
  );
}

function draw(state, firstDraw) {
  const active = focusKey(document.activeElement);
  const open = new Set([...main.querySelectorAll("details[open][data-focus-key]")].map((details) => details.dataset.focusKey));
  const nodes = state.page.render(state.data, state.ui, () => draw(state, false), Date.now());
  main.replaceChildren(...nodes.flat().filter(Boolean));
  for (const details of main.querySelectorAll("details[data-focus-key]")) {
    if (open.has(details.dataset.focusKey)) {
      details.open = true;
    }
  }
  document.title = `${state.page.title(state.data)} · cairn console`;
  if (firstDraw) {
    const title = main.querySelector("h1");
    if (title) {
      title.focus({ preventScroll: true });
    }
  } else {
    const again = findByFocusKey(active);
    if (again) {
      again.focus({ preventScroll: true });
    }
  }
  updated.textContent = `Updated ${new Date().toLocaleTimeString()}${state.page.busy(state.data) ? " · live" : ""}`;
}

function schedule(state, delay) {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => cycle(state), delay);
}

async function cycle(state) {
  let data;
  try {
    data = await state.page.load(state.route);
  } catch (error) {
    if (state.generation !== generation) {
      return;
    }
    if (!(error instanceof api.ApiError) || error.status !== 401) {
      main.replaceChildren(h("h1", { tabindex: "-1", class: "page-title" }, "Could not load this page"), errorBlock(error), h("p", null, "Retrying in a few seconds."));
      schedule(state, IDLE_REFRESH_MS);
    }
    return;
  }
  if (state.generation !== generation) {
    return;
  }
  const text = JSON.stringify(data);
  const busy = state.page.busy(data);
  if (text !== state.text || busy) {
    const before = state.data;
    state.text = text;
    state.data = data;
    draw(state, before === null);
    if (before) {
      announce(state.page.change(before, data));
    }
  }
  schedule(state, busy ? BUSY_REFRESH_MS : IDLE_REFRESH_MS);
}

function navigate() {
  const route = parseRoute(window.location.hash);
  if (!route) {
    const scope = sessionStorage.getItem(SCOPE_KEY) || `/subscriptions/${api.DEFAULT_SUBSCRIPTION}`;
    window.location.replace(routeHref(scope));
    return;
  }
  if (current) {
    clearTimeout(current.timer);
  }
  generation += 1;
  sessionStorage.setItem(SCOPE_KEY, route.scope);
  scopeInput.value = route.scope;
  scopeInput.removeAttribute("aria-invalid");
  scopeError.textContent = "";
  breadcrumbs.replaceChildren(crumbsFor(route));
  current = { generation, route, page: pages[route.kind], ui: {}, data: null, text: null, timer: null };
  main.replaceChildren(h("p", { class: "loading" }, "Loading…"));
  cycle(current);
}

function wireShell() {
  document.getElementById("skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    main.focus();
  });
  scopeForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = scopeInput.value.trim();
    const route = parseRoute(`#${value.startsWith("/") ? value : `/subscriptions/${value}`}`);
    if (!route) {
      scopeError.textContent =
        "Not a scope: give a subscription id, /subscriptions/{id}/resourceGroups/{name}, /providers/Microsoft.Management/managementGroups/{id}, or the id of a stack or deployment.";
      scopeInput.setAttribute("aria-invalid", "true");
      scopeInput.focus();
      return;
    }
    scopeInput.removeAttribute("aria-invalid");
    window.location.hash = routeHref(route.id);
  });
}

async function boot() {
  wireShell();
  api.onUnauthorized(() => signOut("rejected"));
  let open = false;
  if (!api.token()) {
    const probe = await api.probe(null);
    if (probe.outcome === "unauthorized") {
      api.rememberReturn(window.location.hash);
      window.location.replace("/ui/login");
      return;
    }
    if (probe.outcome === "error") {
      main.replaceChildren(h("h1", { tabindex: "-1", class: "page-title" }, "The server could not be reached"), errorBlock(probe.error));
      return;
    }
    open = true;
  }
  renderSession(open);
  window.addEventListener("hashchange", navigate);
  navigate();
}

boot();
