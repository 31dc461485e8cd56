// The console's only way to the server: the ARM REST API of `cairn serve`, called from the browser with the
// bearer token the user gave on the login page (kept in sessionStorage, so it lives as long as this tab).

const TOKEN_KEY = "cairn.console.token";
const RETURN_KEY = "cairn.console.return";

/** The api-versions the console speaks: deployments and resource groups, and deployment stacks. */
export const VERSIONS = Object.freeze({
  resources: "2025-04-01",
  stacks: "2025-07-01",
});

/** cairn's local subscription: cairn keeps no subscription list, and this is the one its CLI uses by default. */
export const DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000";

/** Paths the server pages through `nextLink` are followed at most this many items. */
const MAX_LIST_ITEMS = 5000;

/** An answer that was not 2xx, with ARM's error code and message when the body had them. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details || [];
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** Remembers which console page to come back to after signing in (only console routes). */
export function rememberReturn(hash) {
  if (typeof hash === "string" && hash.startsWith("#/")) {
    sessionStorage.setItem(RETURN_KEY, hash);
  }
}

/** The page remembered by `rememberReturn`, once. */
export function takeReturn() {
  const hash = sessionStorage.getItem(RETURN_KEY);
  sessionStorage.removeItem(RETURN_KEY);
  return hash && hash.startsWith("#/") ? hash : "";
}

let unauthorizedHandler = null;

/** What to do when the server answers 401 to a call made with the stored token (or without one). */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

/** `/a/b c` → `/a/b%20c`: every segment of an ARM id percent-encoded on its own, as the server decodes them. */
export function encodePath(path) {
  return path
    .split("/")
    .map((segment) => encodeURIComponent(segment))
    .join("/");
}

function withApiVersion(url, apiVersion) {
  if (!apiVersion || /[?&]api-version=/.test(url)) {
    return url;
  }
  return `${url}${url.includes("?") ? "&" : "?"}api-version=${encodeURIComponent(apiVersion)}`;
}

function headers(bearer) {
  const result = { Accept: "application/json" };
  if (bearer) {
    result.Authorization = `Bearer ${bearer}`;
  }
  return result;
}

async function errorOf(response) {
  let code = `Http${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`;
  let details = [];
  try {
    const body = await response.json();
    if (body && body.error) {
      code = String(body.error.code || code);
      message = String(body.error.message || message);
      details = Array.isArray(body.error.details) ? body.error.details : [];
    }
  } catch {
    // Not JSON: the status line says enough.
  }
  return new ApiError(response.status, code, message, details);
}

/**
 * One call: `path` is an ARM path (already encoded) or a same-origin URL; resolves to the JSON body (null for
 * an empty one) or rejects with an ApiError. A 401 also calls the unauthorized handler.
 */
export async function call(path, { method = "GET", apiVersion, body, bearer = token() } = {}) {
  const url = withApiVersion(path, apiVersion);
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: body === undefined ? headers(bearer) : { ...headers(bearer), "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
    });
  } catch (error) {
    throw new ApiError(0, "NetworkError", `The server could not be reached (${error.message}).`);
  }
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && unauthorizedHandler) {
      unauthorizedHandler(error);
    }
    throw error;
  }
  if (response.status === 204) {
    return null;
  }
  const text = await response.text();
  if (!text) {
    return null;
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(response.status, "InvalidResponse", "The server's answer was not JSON.");
  }
}

/** GET of an ARM resource by id. */
export function get(id, apiVersion) {
  return call(encodePath(id), { apiVersion });
}

/** GET of an ARM resource by id; null when it does not exist (404). */
export async function find(id, apiVersion) {
  try {
    return await get(id, apiVersion);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      return null;
    }
    throw error;
  }
}

/** Every item of an ARM collection, following `nextLink` on this server only. */
export async function list(path, apiVersion) {
  const items = [];
  let url = withApiVersion(encodePath(path), apiVersion);
  while (url && items.length < MAX_LIST_ITEMS) {
    const page = await call(url);
    if (!page || !Array.isArray(page.value)) {
      break;
    }
    items.push(...page.value);
    url = sameOrigin(page.nextLink);
  }
  return items;
}

/** A `nextLink` as a path of this server, or null when it points elsewhere. */
function sameOrigin(link) {
  if (typeof link !== "string" || !link) {
    return null;
  }
  try {
    const parsed = new URL(link, window.location.origin);
    return parsed.origin === window.location.origin ? parsed.pathname + parsed.search : null;
  } catch {
    return null;
  }
}

/**
 * Whether the server lets `bearer` (or no token at all, when null) in: "ok", "unauthorized" (401, with the
 * error), or an ApiError for anything else that went wrong. A token the server knows but scopes to other
 * subscriptions (403) is "ok": the console works within its scopes.
 */
export async function probe(bearer) {
  if (bearer !== null && !/^[\x21-\x7e]+$/.test(bearer)) {
    return {
      outcome: "unauthorized",
      error: new ApiError(0, "InvalidToken", "A token is printable ASCII without spaces."),
    };
  }
  try {
    await call(encodePath(`/subscriptions/${DEFAULT_SUBSCRIPTION}`), {
      apiVersion: VERSIONS.resources,
      bearer,
    });
    return { outcome: "ok" };
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      return { outcome: "unauthorized", error };
    }
    if (error instanceof ApiError && error.status === 403) {
      return { outcome: "ok" };
    }
    return { outcome: "error", error };
  }
}
