// What the console reads out of the API's answers, without touching the page: routes (ARM ids in the URL
// fragment), states and their colour families, resource keys that match a stack's resources to operations,
// what-if changes and drift results, the dependency graph of a deployment and its operations' timeline.

const TERMINAL_STACK_STATES = new Set(["succeeded", "failed", "canceled"]);
const ACTIVE_DEPLOYMENT_STATES = new Set(["accepted", "running", "creating", "updating", "deleting", "waiting"]);

/** The colour family of any state the API reports (deployment, operation, stack, managed resource, drift). */
export function stateFamily(state) {
  const value = String(state || "").toLowerCase();
  if (["succeeded", "created", "ready", "ok", "managed", "insync"].includes(value)) {
    return "succeeded";
  }
  if (["failed", "deletefailed", "unreachable", "deleted"].includes(value)) {
    return "failed";
  }
  if (["canceled", "cancelled", "notstarted", "detached"].includes(value)) {
    return "canceled";
  }
  if (value === "pending") {
    return "pending";
  }
  if (value === "modified") {
    return "warning";
  }
  if (
    ACTIVE_DEPLOYMENT_STATES.has(value) ||
    ["deploying", "validating", "canceling", "initializing", "deletingresources", "updatingdenyassignments"].includes(value)
  ) {
    return "running";
  }
  return "other";
}

/** The colour family of a what-if change type or a property change. */
export function changeFamily(changeType) {
  const value = String(changeType || "").toLowerCase();
  if (value === "create") {
    return "succeeded";
  }
  if (value === "delete") {
    return "failed";
  }
  if (["modify", "deploy", "array"].includes(value)) {
    return "warning";
  }
  if (value === "detach") {
    return "running";
  }
  return "canceled";
}

/** Whether a stack's provisioningState is one an operation ends in. */
export function isTerminalStack(state) {
  return TERMINAL_STACK_STATES.has(String(state || "").toLowerCase());
}

/** Whether a deployment (or operation) is still going. */
export function isActiveDeployment(state) {
  return ACTIVE_DEPLOYMENT_STATES.has(String(state || "").toLowerCase());
}

/** JSON with object keys sorted at every level: equal values give equal text. */
export function canonicalJson(value) {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(",")}]`;
  }
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value === undefined ? null : value);
}

/**
 * The identity of a resource as stacks know it — its ARM id ignoring case, or extension name + type + identifiers
 * (never the extension version) — for a stack's resource, a what-if change, a drift result entry or an
 * operation's target.
 */
export function resourceKey(resource) {
  if (!resource) {
    return "";
  }
  if (resource.id) {
    return `id:${String(resource.id).toLowerCase()}`;
  }
  const extension = resource.extension || {};
  const type = resource.type || resource.resourceType || "";
  return `ext:${String(extension.name || "").toLowerCase()}|${String(type).toLowerCase()}|${canonicalJson(resource.identifiers || {})}`;
}

/** Type and name of an ARM id: `/subscriptions/s/resourceGroups/rg/providers/A.B/c/n/d/m` → `A.B/c/d`, `n/m`. */
export function armIdParts(id) {
  const segments = String(id || "")
    .split("/")
    .filter((segment) => segment !== "");
  const providers = segments.map((segment) => segment.toLowerCase()).lastIndexOf("providers");
  if (providers < 0) {
    if (segments.length >= 4 && segments[2].toLowerCase() === "resourcegroups") {
      return { type: "Microsoft.Resources/resourceGroups", name: segments[3] };
    }
    return { type: "Microsoft.Resources/subscriptions", name: segments[1] || "" };
  }
  const rest = segments.slice(providers + 1);
  const types = [];
  const names = [];
  for (let index = 1; index < rest.length; index += 2) {
    types.push(rest[index]);
    if (index + 1 < rest.length) {
      names.push(rest[index + 1]);
    }
  }
  return { type: [rest[0], ...types].join("/"), name: names.join("/") };
}

/** How a resource is named on the page: its ARM name, else its identifiers' values. */
export function resourceLabel(resource) {
  if (resource.symbolicName) {
    return resource.symbolicName;
  }
  if (resource.id) {
    return armIdParts(resource.id).name;
  }
  const identifiers = resource.identifiers || {};
  const values = Object.values(identifiers).map((value) => (typeof value === "string" ? value : canonicalJson(value)));
  return values.join(", ") || "(no identifiers)";
}

/** The resource type of a resource, change or operation target. */
export function resourceType(resource) {
  return resource.type || resource.resourceType || (resource.id ? armIdParts(resource.id).type : "");
}

/** ARM timestamps (`2026-01-02T03:04:05.1234567Z`) in milliseconds since the epoch; NaN when unreadable. */
export function parseTimestamp(text) {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$/.exec(String(text || ""));
  if (!match) {
    return Number.NaN;
  }
  const [, year, month, day, hour, minute, second, fraction = "0", zone = "Z"] = match;
  const millis = Math.round(Number(`0.${fraction}`) * 1000);
  let time = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), millis);
  if (zone !== "Z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const [zoneHours, zoneMinutes] = zone.slice(1).split(":").map(Number);
    time -= sign * (zoneHours * 60 + zoneMinutes) * 60000;
  }
  return time;
}

/** ISO 8601 durations (`PT1M2.5S`, `P1DT2H`) in milliseconds; NaN when unreadable. */
export function parseDuration(text) {
  const match = /^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(
    String(text || ""),
  );
  if (!match || text === "P" || text === "PT") {
    return Number.NaN;
  }
  const [, weeks = 0, days = 0, hours = 0, minutes = 0, seconds = 0] = match;
  return ((((Number(weeks) * 7 + Number(days)) * 24 + Number(hours)) * 60 + Number(minutes)) * 60 + Number(seconds)) * 1000;
}

/** A duration for people: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`. */
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) {
    return "";
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60000) {
    return `${(ms / 1000).toFixed(1)} s`;
  }
  if (ms < 3600000) {
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }
  return `${Math.floor(ms / 3600000)} h ${Math.round((ms % 3600000) / 60000)} min`;
}

/** A timestamp in the reader's local time, or "" when there is none. */
export function formatTime(ms) {
  return Number.isFinite(ms) ? new Date(ms).toLocaleString() : "";
}

/**
 * What a console URL fragment addresses. Fragments are ARM ids: `#/subscriptions/{s}[/resourceGroups/{rg}]`,
 * `#/providers/Microsoft.Management/managementGroups/{mg}`, and under either scope
 * `/providers/Microsoft.Resources/deploymentStacks/{name}` or `.../deployments/{name}`. Null for anything else.
 */
export function parseRoute(hash) {
  const text = String(hash || "").replace(/^#/, "");
  if (!text.startsWith("/")) {
    return null;
  }
  let segments;
  try {
    segments = text
      .split("/")
      .filter((segment) => segment !== "")
      .map((segment) => decodeURIComponent(segment));
  } catch {
    return null;
  }
  const lower = segments.map((segment) => segment.toLowerCase());
  let scope;
  let rest;
  let route;
  if (lower[0] === "subscriptions" && segments.length >= 2) {
    if (lower[2] === "resourcegroups" && segments.length >= 4) {
      scope = `/subscriptions/${segments[1]}/resourceGroups/${segments[3]}`;
      route = { kind: "resourceGroup", subscription: segments[1], resourceGroup: segments[3] };
      rest = 4;
    } else {
      scope = `/subscriptions/${segments[1]}`;
      route = { kind: "subscription", subscription: segments[1] };
      rest = 2;
    }
  } else if (
    lower[0] === "providers" &&
    lower[1] === "microsoft.management" &&
    lower[2] === "managementgroups" &&
    segments.length >= 4
  ) {
    scope = `/providers/Microsoft.Management/managementGroups/${segments[3]}`;
    route = { kind: "managementGroup", managementGroup: segments[3] };
    rest = 4;
  } else {
    return null;
  }
  route.scope = scope;
  route.scopeKind = route.kind;
  const tail = lower.slice(rest);
  if (tail.length === 0) {
    route.id = scope;
    return route;
  }
  if (tail.length === 4 && tail[0] === "providers" && tail[1] === "microsoft.resources") {
    const name = segments[rest + 3];
    if (tail[2] === "deploymentstacks") {
      return { ...route, kind: "stack", name, id: `${scope}/providers/Microsoft.Resources/deploymentStacks/${name}` };
    }
    if (tail[2] === "deployments") {
      return { ...route, kind: "deployment", name, id: `${scope}/providers/Microsoft.Resources/deployments/${name}` };
    }
  }
  return null;
}

/** The console fragment of an ARM id (each segment percent-encoded). */
export function routeHref(id) {
  return `#${String(id)
    .split("/")
    .map((segment) => encodeURIComponent(segment))
    .join("/")}`;
}

/** The scope part of a stack or deployment id. */
export function scopeOf(id) {
  const index = String(id).toLowerCase().lastIndexOf("/providers/microsoft.resources/");
  return index < 0 ? String(id) : String(id).slice(0, index);
}

/** A scope as a short phrase: `resource group app`, `subscription 0000…`, `management group corp`. */
export function describeScope(scope) {
  const route = parseRoute(`#${scope}`);
  if (!route) {
    return scope;
  }
  if (route.scopeKind === "resourceGroup") {
    return `resource group ${route.resourceGroup}`;
  }
  if (route.scopeKind === "managementGroup") {
    return `management group ${route.managementGroup}`;
  }
  return `subscription ${route.subscription}`;
}

function dependencyKey(entry) {
  return entry.id
    ? `id:${String(entry.id).toLowerCase()}`
    : `sym:${String(entry.resourceType || "").toLowerCase()}|${String(entry.resourceName || "").toLowerCase()}`;
}

function targetKey(target) {
  return target.id
    ? `id:${String(target.id).toLowerCase()}`
    : `sym:${String(target.resourceType || "").toLowerCase()}|${String(target.symbolicName || target.resourceName || "").toLowerCase()}`;
}

/** Which of two operation states a node shows when copies share it: what still needs attention wins. */
const STATE_RANK = { running: 5, accepted: 4, failed: 3, canceled: 2, succeeded: 1 };

function rank(state) {
  return STATE_RANK[String(state || "").toLowerCase()] || 0;
}

/**
 * The dependency graph of a deployment: nodes from its plan's `dependencies` (every resource that depends on
 * another or is depended on) and from its operations (every resource started), edges from `dependsOn`
 * (prerequisite → dependent). A node without an operation is `Pending` while the deployment runs, `NotStarted`
 * after it. Copies of an extension resource share a node (the plan names them by symbolic name).
 */
export function buildGraph(deployment, operations) {
  const nodes = new Map();
  const edges = new Map();
  const touch = (key, fields) => {
    let node = nodes.get(key);
    if (!node) {
      node = { key, label: "", type: "", id: null, state: null, operations: 0 };
      nodes.set(key, node);
    }
    if (fields.symbolicName) {
      node.label = fields.symbolicName;
    } else if (!node.label && fields.name) {
      node.label = fields.name;
    }
    node.type = node.type || fields.type || "";
    node.id = node.id || fields.id || null;
    return node;
  };
  const dependencies = (deployment && deployment.properties && deployment.properties.dependencies) || [];
  for (const entry of dependencies) {
    const key = dependencyKey(entry);
    touch(key, { name: entry.resourceName, type: entry.resourceType, id: entry.id });
    for (const prerequisite of entry.dependsOn || []) {
      const from = dependencyKey(prerequisite);
      touch(from, { name: prerequisite.resourceName, type: prerequisite.resourceType, id: prerequisite.id });
      if (from !== key) {
        edges.set(`${from}\n${key}`, { from, to: key });
      }
    }
  }
  for (const operation of operations || []) {
    const properties = operation.properties || {};
    const target = properties.targetResource;
    if (!target) {
      continue;
    }
    const node = touch(targetKey(target), {
      symbolicName: target.symbolicName,
      name: target.resourceName,
      type: target.resourceType,
      id: target.id,
    });
    node.operations += 1;
    if (rank(properties.provisioningState) >= rank(node.state)) {
      node.state = properties.provisioningState || node.state;
    }
  }
  const running = deployment && isActiveDeployment(deployment.properties && deployment.properties.provisioningState);
  for (const node of nodes.values()) {
    if (!node.state) {
      node.state = running ? "Pending" : "NotStarted";
    }
    if (!node.label) {
      node.label = node.id ? armIdParts(node.id).name : node.key;
    }
  }
  return { nodes: [...nodes.values()], edges: [...edges.values()] };
}

/** Start and end (ms) of an operation: a finished one ends at its timestamp; a running one started at it. */
export function operationSpan(operation) {
  const properties = operation.properties || {};
  const stamp = parseTimestamp(properties.timestamp);
  const duration = parseDuration(properties.duration);
  if (isActiveDeployment(properties.provisioningState) || !Number.isFinite(duration)) {
    return { start: stamp, end: null };
  }
  return { start: stamp - duration, end: stamp };
}

/**
 * The rows of an operations timeline, earliest start first, and the window they span (a running operation
 * reaches `now`).
 */
export function timelineRows(operations, now) {
  const rows = [];
  for (const operation of operations || []) {
    const properties = operation.properties || {};
    const target = properties.targetResource || {};
    const span = operationSpan(operation);
    if (!Number.isFinite(span.start)) {
      continue;
    }
    rows.push({
      key: operation.operationId || operation.id,
      label: target.symbolicName || target.resourceName || resourceLabel(target),
      type: target.resourceType || "",
      operation: properties.provisioningOperation || "",
      state: properties.provisioningState || "",
      start: span.start,
      end: span.end,
      shownEnd: span.end === null ? Math.max(now, span.start) : span.end,
      error: properties.statusMessage && properties.statusMessage.error,
    });
  }
  rows.sort((a, b) => a.start - b.start || a.label.localeCompare(b.label));
  const start = rows.length ? Math.min(...rows.map((row) => row.start)) : now;
  const end = rows.length ? Math.max(...rows.map((row) => row.shownEnd)) : now;
  return { rows, start, end };
}

/** The latest operation of each resource of a deployment, by resource key. */
export function operationsByResource(operations) {
  const result = new Map();
  for (const operation of operations || []) {
    const target = (operation.properties || {}).targetResource;
    if (target) {
      result.set(resourceKey({ ...target, type: target.resourceType }), operation);
    }
  }
  return result;
}
