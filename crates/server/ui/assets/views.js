// The console's pages. Each page loads what it shows from the API (`load`, plain data only, so two loads can be
// compared to skip redrawing when nothing changed), draws it (`render`, from the data and the page's own
// interface state), and says whether an operation is under way (`busy`: the page then refreshes every second).

import * as api from "./api.js";
import { renderDrift, renderWhatIf } from "./diff.js";
import { badge, errorBlock, facts, h, section, table } from "./dom.js";
import { renderGraph } from "./graph.js";
import {
  buildGraph,
  describeScope,
  formatDuration,
  formatTime,
  isActiveDeployment,
  isTerminalStack,
  operationsByResource,
  parseDuration,
  parseTimestamp,
  resourceKey,
  resourceLabel,
  resourceType,
  routeHref,
  scopeOf,
  stateFamily,
} from "./model.js";
import { renderTimeline } from "./timeline.js";

const { VERSIONS } = api;
const STACKS = "/providers/Microsoft.Resources/deploymentStacks";
const DEPLOYMENTS = "/providers/Microsoft.Resources/deployments";
const WHAT_IFS = "/providers/Microsoft.Resources/deploymentStacksWhatIfResults";
/** How many scopes a subscription page reads at once. */
const SCOPE_READS_IN_FLIGHT = 4;

/** An error as plain data (so loads compare as JSON). */
function plainError(error) {
  return {
    status: error.status || 0,
    code: error.code || "Error",
    message: error.message || String(error),
    details: error.details || [],
  };
}

/** `{value}` or `{error}`: one read that may fail without failing the page. */
async function attempt(read) {
  try {
    return { value: await read() };
  } catch (error) {
    if (error instanceof api.ApiError) {
      return { error: plainError(error) };
    }
    throw error;
  }
}

async function mapLimit(items, limit, work) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next;
      next += 1;
      results[index] = await work(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function link(id, text) {
  return h("a", { href: routeHref(id) }, text);
}

function stateBadge(state) {
  return badge(state, stateFamily(state));
}

function heading(text, kind) {
  return h("h1", { tabindex: "-1", class: "page-title" }, h("span", { class: "kind" }, kind), text);
}

function scopeLabel(scope, pageScope) {
  return scope.toLowerCase() === pageScope.toLowerCase() ? "this scope" : describeScope(scope);
}

function durationText(text) {
  return formatDuration(parseDuration(text));
}

// --- scope: stacks and deployments of a subscription (and its resource groups), a group or a management group

async function loadScope(route) {
  let groups = null;
  const scopes = [route.scope];
  if (route.kind === "subscription") {
    groups = await attempt(() => api.list(`${route.scope}/resourcegroups`, VERSIONS.resources));
    for (const group of groups.value || []) {
      scopes.push(group.id);
    }
  }
  const perScope = await mapLimit(scopes, SCOPE_READS_IN_FLIGHT, async (scope) => {
    const [stacks, deployments] = await Promise.all([
      attempt(() => api.list(`${scope}${STACKS}`, VERSIONS.stacks)),
      attempt(() => api.list(`${scope}${DEPLOYMENTS}`, VERSIONS.resources)),
    ]);
    return { scope, stacks, deployments };
  });
  return { route, groups, perScope };
}

function scopeErrors(perScope, field, what) {
  const failed = perScope.filter((entry) => entry[field].error);
  if (!failed.length) {
    return null;
  }
  return h(
    "ul",
    { class: "errors" },
    failed.map((entry) =>
      h("li", null, `Could not list ${what} at ${describeScope(entry.scope)}: `, h("code", null, entry[field].error.code), " ", entry[field].error.message),
    ),
  );
}

function renderScope(data) {
  const { route, groups, perScope } = data;
  const stacks = perScope.flatMap((entry) => (entry.stacks.value || []).map((stack) => ({ stack, scope: entry.scope })));
  const deployments = perScope.flatMap((entry) =>
    (entry.deployments.value || []).map((deployment) => ({ deployment, scope: entry.scope })),
  );
  deployments.sort((a, b) => {
    const active = Number(isActiveDeployment(b.deployment.properties.provisioningState)) - Number(isActiveDeployment(a.deployment.properties.provisioningState));
    return active || parseTimestamp(b.deployment.properties.timestamp) - parseTimestamp(a.deployment.properties.timestamp) || 0;
  });
  const title =
    route.kind === "subscription"
      ? heading(route.subscription, "Subscription")
      : route.kind === "resourceGroup"
        ? heading(route.resourceGroup, "Resource group")
        : heading(route.managementGroup, "Management group");
  const stackRows = stacks.map(({ stack, scope }) => {
    const properties = stack.properties || {};
    return [
      link(stack.id, stack.name),
      scopeLabel(scope, route.scope),
      stateBadge(properties.provisioningState),
      String((properties.resources || []).length),
      durationText(properties.duration),
    ];
  });
  const deploymentRows = deployments.map(({ deployment, scope }) => {
    const properties = deployment.properties || {};
    return [
      link(deployment.id, deployment.name),
      scopeLabel(scope, route.scope),
      stateBadge(properties.provisioningState),
      formatTime(parseTimestamp(properties.timestamp)),
      durationText(properties.duration),
    ];
  });
  const parts = [
    title,
    h("p", { class: "muted" }, h("code", { class: "wrap" }, route.scope)),
    section(
      "stacks",
      "Deployment stacks",
      2,
      stackRows.length
        ? table("Deployment stacks", ["Name", "Scope", "State", "Resources", "Last operation took"], stackRows, { captionHidden: true })
        : h("p", { class: "empty" }, "No deployment stack here."),
      scopeErrors(perScope, "stacks", "stacks"),
    ),
    section(
      "deployments",
      "Deployments",
      2,
      deploymentRows.length
        ? table("Deployments", ["Name", "Scope", "State", "Last change", "Duration"], deploymentRows, { captionHidden: true })
        : h("p", { class: "empty" }, "No deployment here."),
      scopeErrors(perScope, "deployments", "deployments"),
    ),
  ];
  if (groups) {
    parts.push(
      section(
        "groups",
        "Resource groups",
        2,
        groups.error
          ? errorBlock(groups.error, "Could not list the resource groups (a token scoped to one group can open it by its id).")
          : (groups.value || []).length
            ? h(
                "ul",
                { class: "links" },
                groups.value.map((group) => h("li", null, link(group.id, group.name), h("span", { class: "muted" }, ` ${group.location || ""}`))),
              )
            : h("p", { class: "empty" }, "No resource group in this subscription."),
      ),
    );
  }
  return parts;
}

function scopeBusy(data) {
  return data.perScope.some(
    (entry) =>
      (entry.stacks.value || []).some((stack) => !isTerminalStack(stack.properties.provisioningState)) ||
      (entry.deployments.value || []).some((deployment) => isActiveDeployment(deployment.properties.provisioningState)),
  );
}

// --- deployment: state, graph, timeline and outputs of one deployment

async function loadDeploymentParts(id) {
  const deployment = await api.find(id, VERSIONS.resources);
  if (!deployment) {
    return { deployment: null, operations: [] };
  }
  const operations = await api.list(`${id}/operations`, VERSIONS.resources);
  return { deployment, operations };
}

/** A nested deployment's node links to its own page. */
function nestedHref(node) {
  return node.id && /\/providers\/microsoft\.resources\/deployments\/[^/]+$/i.test(node.id) ? routeHref(node.id) : null;
}

function graphSection(deployment, operations) {
  return section(
    "graph",
    "Dependency graph",
    2,
    deployment
      ? renderGraph(buildGraph(deployment, operations), { title: `Dependency graph of deployment ${deployment.name}`, hrefOf: nestedHref })
      : h("p", { class: "empty" }, "No deployment yet."),
  );
}

function timelineSection(deployment, operations, now) {
  const properties = (deployment && deployment.properties) || {};
  return section(
    "timeline",
    "Last operation",
    2,
    deployment
      ? h(
          "p",
          null,
          "Deployment ",
          link(deployment.id, deployment.name),
          " ",
          stateBadge(properties.provisioningState),
          properties.timestamp ? ` · last change ${formatTime(parseTimestamp(properties.timestamp))}` : "",
          properties.duration ? ` · took ${durationText(properties.duration)}` : "",
        )
      : null,
    deployment ? renderTimeline(operations, now) : h("p", { class: "empty" }, "No deployment yet."),
  );
}

function outputsSection(outputs) {
  const entries = Object.entries(outputs || {});
  if (!entries.length) {
    return null;
  }
  return section(
    "outputs",
    "Outputs",
    2,
    table(
      "Outputs",
      ["Name", "Type", "Value"],
      entries.map(([name, output]) => [
        name,
        (output && output.type) || "",
        h("code", { class: "wrap" }, typeof (output && output.value) === "string" ? output.value : JSON.stringify(output && output.value)),
      ]),
      { captionHidden: true },
    ),
  );
}

async function loadDeployment(route) {
  const { deployment, operations } = await loadDeploymentParts(route.id);
  return { route, deployment, operations };
}

function renderDeployment(data, ui, redraw, now) {
  const { route, deployment, operations } = data;
  if (!deployment) {
    return [heading(route.name, "Deployment"), h("p", { class: "empty" }, "This deployment does not exist (or no longer does).")];
  }
  const properties = deployment.properties || {};
  return [
    heading(deployment.name, "Deployment"),
    facts([
      ["State", stateBadge(properties.provisioningState)],
      ["Scope", h("code", { class: "wrap" }, scopeOf(deployment.id))],
      ["Mode", properties.mode],
      ["Correlation id", properties.correlationId],
      ["Last change", formatTime(parseTimestamp(properties.timestamp))],
      ["Duration", durationText(properties.duration)],
    ]),
    properties.error ? errorBlock(properties.error, "The deployment failed") : null,
    graphSection(deployment, operations),
    timelineSection(deployment, operations, now),
    outputsSection(properties.outputs),
  ];
}

function deploymentBusy(data) {
  return Boolean(data.deployment && isActiveDeployment(data.deployment.properties.provisioningState));
}

// --- stack: its managed resources, graph, last operation, what-if results and drift

async function loadStack(route) {
  const stack = await api.find(route.id, VERSIONS.stacks);
  if (!stack) {
    return { route, stack: null };
  }
  const properties = stack.properties || {};
  const deploymentId =
    properties.deploymentId || `${properties.deploymentScope || route.scope}${DEPLOYMENTS}/${stack.name}`;
  const [deploymentParts, whatIfs, drift] = await Promise.all([
    attempt(() => loadDeploymentParts(deploymentId)),
    attempt(() => api.list(`${route.scope}${WHAT_IFS}`, VERSIONS.stacks)),
    loadDrift(route.id),
  ]);
  const ownWhatIfs = (whatIfs.value || []).filter(
    (result) => String((result.properties || {}).deploymentStackResourceId || "").toLowerCase() === route.id.toLowerCase(),
  );
  return {
    route,
    stack,
    deploymentId,
    deployment: deploymentParts.value ? deploymentParts.value.deployment : null,
    operations: deploymentParts.value ? deploymentParts.value.operations : [],
    deploymentError: deploymentParts.error || null,
    whatIfs: whatIfs.error ? { error: whatIfs.error } : { value: ownWhatIfs },
    drift,
  };
}

/**
 * The stack's latest drift detection result: `{value}` (newest first in the list the server gives oldest first),
 * `{none: true}` when there is none — the server has no result, or does not serve drift detection (404) — or
 * `{error}`.
 */
async function loadDrift(stackId) {
  try {
    const results = await api.list(`${stackId}/driftDetectionResults`, VERSIONS.stacks);
    return results.length ? { value: results[results.length - 1], count: results.length } : { none: true };
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 404) {
      return { none: true };
    }
    if (error instanceof api.ApiError) {
      return { error: plainError(error) };
    }
    throw error;
  }
}

function extensionText(resource) {
  const extension = resource.extension;
  return extension ? `${extension.name || ""} ${extension.version || ""}`.trim() : "ARM";
}

function resourcesSection(stack, operations, drift) {
  const properties = stack.properties || {};
  const resources = properties.resources || [];
  const byResource = operationsByResource(operations);
  const drifted = new Map(((drift.value && drift.value.properties && drift.value.properties.resources) || []).map((entry) => [resourceKey(entry), entry]));
  const rows = resources.map((resource) => {
    const key = resourceKey(resource);
    const operation = byResource.get(key);
    const driftEntry = drifted.get(key);
    return [
      resourceLabel(resource),
      extensionText(resource),
      resourceType(resource),
      h("code", { class: "wrap" }, resource.id || JSON.stringify(resource.identifiers || {})),
      stateBadge(resource.status),
      operation ? stateBadge(operation.properties.provisioningState) : h("span", { class: "muted" }, "—"),
      driftEntry ? stateBadge(driftEntry.driftStatus) : h("span", { class: "muted", title: "no drift result" }, "—"),
    ];
  });
  const others = [
    ["Deleted", properties.deletedResources],
    ["Detached", properties.detachedResources],
    ["Failed", properties.failedResources],
  ].filter(([, list]) => Array.isArray(list) && list.length);
  return section(
    "resources",
    "Managed resources",
    2,
    rows.length
      ? table("Managed resources", ["Resource", "Extension", "Type", "Identifiers", "Status", "Last operation", "Drift"], rows, {
          captionHidden: true,
          className: "resources",
        })
      : h("p", { class: "empty" }, "The stack manages no resource yet."),
    others.map(([title, list]) =>
      h(
        "details",
        { class: "others", dataset: { focusKey: `others:${title}` } },
        h("summary", null, `${title} by the last operation: ${list.length}`),
        h(
          "ul",
          null,
          list.map((resource) =>
            h("li", null, resourceLabel(resource), " ", h("span", { class: "muted" }, resourceType(resource)), resource.error ? ` — ${resource.error.code}: ${resource.error.message}` : ""),
          ),
        ),
      ),
    ),
  );
}

function showUnchangedToggle(id, ui, redraw) {
  return h(
    "p",
    { class: "toggle" },
    h("input", {
      type: "checkbox",
      id,
      checked: ui.showUnchanged || false,
      on: {
        change: (event) => {
          ui.showUnchanged = event.target.checked;
          redraw();
        },
      },
    }),
    h("label", { for: id }, "Show unchanged resources"),
  );
}

function whatIfSection(data, ui, redraw) {
  const { whatIfs } = data;
  if (whatIfs.error) {
    return section("what-if", "What-if results", 2, errorBlock(whatIfs.error, "Could not list the stack's what-if results"));
  }
  const results = whatIfs.value;
  if (!results.length) {
    return section("what-if", "What-if results", 2, h("p", { class: "empty" }, "No what-if result for this stack (cairn stack … what-if keeps one)."));
  }
  return section(
    "what-if",
    "What-if results",
    2,
    showUnchangedToggle("what-if-unchanged", ui, redraw),
    h(
      "ul",
      { class: "results" },
      results.map((result) => {
        const open = ui.whatIf === result.name;
        const panelId = `what-if-${result.name}`;
        const changes = ((result.properties || {}).changes || {}).resourceChanges || [];
        const changed = changes.filter((change) => String(change.changeType).toLowerCase() !== "nochange").length;
        return h(
          "li",
          null,
          h(
            "button",
            {
              type: "button",
              class: "disclosure",
              "aria-expanded": open ? "true" : "false",
              "aria-controls": panelId,
              dataset: { focusKey: `what-if:${result.name}`, result: result.name },
              on: {
                click: () => {
                  ui.whatIf = open ? null : result.name;
                  redraw();
                },
              },
            },
            `${result.name} — ${changed} of ${changes.length} resources change`,
          ),
          " ",
          stateBadge((result.properties || {}).provisioningState),
          open ? h("div", { id: panelId, class: "result-panel" }, renderWhatIf(result, { showUnchanged: ui.showUnchanged })) : null,
        );
      }),
    ),
  );
}

function driftSection(data, ui, redraw) {
  const { drift } = data;
  let body;
  if (drift.error) {
    body = errorBlock(drift.error, "Could not read the stack's drift detection results");
  } else if (drift.none) {
    body = h("p", { class: "empty", id: "no-drift" }, "No drift result for this stack (cairn stack … drift detects drift).");
  } else {
    body = [
      h("p", { class: "muted" }, `Latest of ${drift.count} result${drift.count === 1 ? "" : "s"}: ${drift.value.name}`),
      showUnchangedToggle("drift-unchanged", ui, redraw),
      renderDrift(drift.value, { showUnchanged: ui.showUnchanged }),
    ];
  }
  return section("drift", "Drift", 2, body);
}

function renderStack(data, ui, redraw, now) {
  const { route, stack } = data;
  if (!stack) {
    return [heading(route.name, "Deployment stack"), h("p", { class: "empty" }, "This stack does not exist (or no longer does).")];
  }
  const properties = stack.properties || {};
  const unmanage = properties.actionOnUnmanage || {};
  return [
    heading(stack.name, "Deployment stack"),
    facts([
      ["State", stateBadge(properties.provisioningState)],
      ["Scope", h("code", { class: "wrap" }, route.scope)],
      ["Deploys to", properties.deploymentScope ? h("code", { class: "wrap" }, properties.deploymentScope) : ""],
      ["Deployment", link(data.deploymentId, scopeOf(data.deploymentId) === route.scope ? stack.name : data.deploymentId)],
      ["On unmanage", Object.entries(unmanage).map(([what, action]) => `${what}: ${action}`).join(", ")],
      ["Deny settings", (properties.denySettings || {}).mode],
      ["Correlation id", properties.correlationId],
      ["Last operation took", durationText(properties.duration)],
    ]),
    properties.error ? errorBlock(properties.error, "The last operation failed") : null,
    data.deploymentError ? errorBlock(data.deploymentError, "Could not read the stack's deployment") : null,
    resourcesSection(stack, data.operations, data.drift),
    graphSection(data.deployment, data.operations),
    timelineSection(data.deployment, data.operations, now),
    whatIfSection(data, ui, redraw),
    driftSection(data, ui, redraw),
    outputsSection(properties.outputs),
  ];
}

function stackBusy(data) {
  if (!data.stack) {
    return false;
  }
  const driftRunning = data.drift.value && String((data.drift.value.properties || {}).status).toLowerCase() === "running";
  return (
    !isTerminalStack(data.stack.properties.provisioningState) ||
    Boolean(data.deployment && isActiveDeployment(data.deployment.properties.provisioningState)) ||
    Boolean(driftRunning)
  );
}

/** A line for the live region when a page's main state changed between two loads, or null. */
function stackChange(before, after) {
  const was = before.stack && before.stack.properties.provisioningState;
  const is = after.stack && after.stack.properties.provisioningState;
  return was && is && was !== is ? `Stack ${after.stack.name} is now ${is}.` : null;
}

function deploymentChange(before, after) {
  const was = before.deployment && before.deployment.properties.provisioningState;
  const is = after.deployment && after.deployment.properties.provisioningState;
  return was && is && was !== is ? `Deployment ${after.deployment.name} is now ${is}.` : null;
}

function pageTitle(kind) {
  return (data) => {
    const route = data.route;
    return `${route.name || route.resourceGroup || route.managementGroup || route.subscription} · ${kind}`;
  };
}

/** The pages by route kind (see `parseRoute`). */
export const pages = {
  subscription: { load: loadScope, render: renderScope, busy: scopeBusy, change: () => null, title: pageTitle("subscription") },
  resourceGroup: { load: loadScope, render: renderScope, busy: scopeBusy, change: () => null, title: pageTitle("resource group") },
  managementGroup: { load: loadScope, render: renderScope, busy: scopeBusy, change: () => null, title: pageTitle("management group") },
  stack: { load: loadStack, render: renderStack, busy: stackBusy, change: stackChange, title: pageTitle("deployment stack") },
  deployment: { load: loadDeployment, render: renderDeployment, busy: deploymentBusy, change: deploymentChange, title: pageTitle("deployment") },
};
