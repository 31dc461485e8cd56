// Persisted stack what-if results and drift detection results shown as diffs: one block per resource with its
// change (or drift status) in words and colour, and each property change as removed (-) and added (+) lines.
// Multi-line strings (file contents, scripts) are compared line by line.

import { h } from "./dom.js";
import { changeFamily, formatTime, parseTimestamp, resourceLabel, resourceType, stateFamily } from "./model.js";

/** Above this many lines a side, strings are shown whole rather than compared line by line. */
const MAX_DIFF_LINES = 400;

function lines(value) {
  if (value === undefined) {
    return [];
  }
  if (typeof value === "string" && value.includes("\n")) {
    return value.replace(/\n$/, "").split("\n");
  }
  return JSON.stringify(value, null, 2).split("\n");
}

/** Line-level edit script of two line lists (longest common subsequence): [[" "|"-"|"+", line]]. */
export function lineDiff(before, after) {
  if (before.length > MAX_DIFF_LINES || after.length > MAX_DIFF_LINES) {
    return [...before.map((line) => ["-", line]), ...after.map((line) => ["+", line])];
  }
  const rows = before.length + 1;
  const columns = after.length + 1;
  const common = new Array(rows * columns).fill(0);
  for (let i = before.length - 1; i >= 0; i -= 1) {
    for (let j = after.length - 1; j >= 0; j -= 1) {
      common[i * columns + j] =
        before[i] === after[j]
          ? common[(i + 1) * columns + j + 1] + 1
          : Math.max(common[(i + 1) * columns + j], common[i * columns + j + 1]);
    }
  }
  const script = [];
  let i = 0;
  let j = 0;
  while (i < before.length && j < after.length) {
    if (before[i] === after[j]) {
      script.push([" ", before[i]]);
      i += 1;
      j += 1;
    } else if (common[(i + 1) * columns + j] >= common[i * columns + j + 1]) {
      script.push(["-", before[i]]);
      i += 1;
    } else {
      script.push(["+", after[j]]);
      j += 1;
    }
  }
  for (; i < before.length; i += 1) {
    script.push(["-", before[i]]);
  }
  for (; j < after.length; j += 1) {
    script.push(["+", after[j]]);
  }
  return script;
}

function diffLines(script) {
  return h(
    "pre",
    { class: "diff" },
    script.map(([sign, line]) => {
      const text = `${sign} ${line}\n`;
      if (sign === "-") {
        return h("del", null, text);
      }
      if (sign === "+") {
        return h("ins", null, text);
      }
      return h("span", { class: "same" }, text);
    }),
  );
}

function propertyChange(change) {
  const before = lines(change.before);
  const after = lines(change.after);
  const multiline = typeof change.before === "string" && typeof change.after === "string" && (before.length > 1 || after.length > 1);
  const script = multiline ? lineDiff(before, after) : [...before.map((line) => ["-", line]), ...after.map((line) => ["+", line])];
  return h(
    "li",
    { class: "property-change" },
    h(
      "p",
      { class: "change-path" },
      h("span", { class: `badge state-${changeFamily(change.changeType)}` }, change.changeType || "change"),
      " ",
      h("code", null, change.path || "(value)"),
    ),
    script.length ? diffLines(script) : null,
    Array.isArray(change.children) && change.children.length
      ? h("ul", { class: "property-changes nested" }, change.children.map(propertyChange))
      : null,
  );
}

function propertyChanges(changes) {
  return h("ul", { class: "property-changes" }, changes.map(propertyChange));
}

function identity(resource) {
  if (resource.id) {
    return h("code", { class: "wrap" }, resource.id);
  }
  const extension = resource.extension || {};
  return h(
    "span",
    null,
    `${extension.name || "extension"}${extension.version ? ` ${extension.version}` : ""} · ${resourceType(resource)} · `,
    h("code", { class: "wrap" }, JSON.stringify(resource.identifiers || {})),
  );
}

function whole(value, sign) {
  return value === undefined || value === null ? null : diffLines(lines(value).map((line) => [sign, line]));
}

function resourceChange(change, index) {
  const family = changeFamily(change.changeType);
  const configuration = change.resourceConfigurationChanges || {};
  const delta = Array.isArray(configuration.delta) ? configuration.delta : [];
  let body = null;
  if (delta.length) {
    body = propertyChanges(delta);
  } else if (String(change.changeType).toLowerCase() === "create") {
    body = whole(configuration.after, "+");
  } else if (String(change.changeType).toLowerCase() === "delete") {
    body = whole(configuration.before, "-");
  }
  const management = change.managementStatusChange || {};
  const managementText =
    management.before || management.after ? `${management.before || "—"} → ${management.after || "—"}` : "";
  return h(
    "article",
    { class: `change change-${family}`, dataset: { changeType: change.changeType || "", index: String(index) } },
    h(
      "h4",
      null,
      h("span", { class: `badge state-${family}` }, change.changeType || "change"),
      " ",
      resourceLabel(change),
      h("span", { class: "muted" }, ` ${resourceType(change)}`),
    ),
    h(
      "p",
      { class: "change-meta" },
      identity(change),
      change.changeCertainty ? ` · certainty ${change.changeCertainty}` : "",
      managementText ? ` · management ${managementText}` : "",
      change.unsupportedReason ? ` · ${change.unsupportedReason}` : "",
    ),
    body,
  );
}

function countBy(items, field) {
  const counts = new Map();
  for (const item of items) {
    const value = item[field] || "unknown";
    counts.set(value, (counts.get(value) || 0) + 1);
  }
  return counts;
}

function counts(map, family) {
  return h(
    "ul",
    { class: "counts" },
    [...map.entries()].map(([value, count]) => h("li", null, h("span", { class: `badge state-${family(value)}` }, value), ` ${count}`)),
  );
}

function stackLevelChange(title, change) {
  if (!change) {
    return null;
  }
  const before = change.before === undefined ? undefined : change.before;
  const after = change.after === undefined ? undefined : change.after;
  if (JSON.stringify(before) === JSON.stringify(after)) {
    return null;
  }
  return h("div", { class: "change change-warning" }, h("h4", null, title), diffLines(lineDiff(lines(before), lines(after))));
}

/** A stack what-if result: counts per change type, stack-level changes, diagnostics and each resource's diff. */
export function renderWhatIf(result, { showUnchanged }) {
  const properties = result.properties || {};
  const changes = (properties.changes && properties.changes.resourceChanges) || [];
  const shown = changes.filter((change) => showUnchanged || String(change.changeType).toLowerCase() !== "nochange");
  const diagnostics = properties.diagnostics || [];
  return h(
    "div",
    { class: "what-if", dataset: { result: result.name || "" } },
    counts(countBy(changes, "changeType"), changeFamily),
    stackLevelChange("Deny settings", properties.changes && properties.changes.denySettingsChange),
    stackLevelChange("Deployment scope", properties.changes && properties.changes.deploymentScopeChange),
    diagnostics.length
      ? h(
          "ul",
          { class: "diagnostics" },
          diagnostics.map((diagnostic) =>
            h("li", null, h("span", { class: `badge state-${diagnostic.level === "error" ? "failed" : "warning"}` }, diagnostic.level || "info"), " ", h("code", null, diagnostic.code || ""), " ", diagnostic.message || ""),
          ),
        )
      : null,
    properties.error ? h("p", { class: "error-title" }, `${properties.error.code}: ${properties.error.message}`) : null,
    shown.length ? shown.map(resourceChange) : h("p", { class: "empty" }, changes.length ? "Every resource is unchanged." : "No resource changes."),
  );
}

function driftEntry(resource, index) {
  const status = resource.driftStatus || "unknown";
  const family = stateFamily(status);
  const changes = Array.isArray(resource.propertyChanges) ? resource.propertyChanges : [];
  return h(
    "article",
    { class: `change change-${family}`, dataset: { driftStatus: status, index: String(index) } },
    h("h4", null, h("span", { class: `badge state-${family}` }, status), " ", resourceLabel(resource), h("span", { class: "muted" }, ` ${resourceType(resource)}`)),
    h("p", { class: "change-meta" }, identity(resource), resource.message ? ` · ${resource.message}` : ""),
    resource.error ? h("p", { class: "error-title" }, h("code", null, resource.error.code || "Error"), " ", resource.error.message || "") : null,
    changes.length ? propertyChanges(changes) : null,
  );
}

/** A drift detection result: its status and window, counts per drift status, and each drifted resource's diff. */
export function renderDrift(result, { showUnchanged }) {
  const properties = result.properties || {};
  const resources = properties.resources || [];
  const shown = resources.filter((resource) => showUnchanged || String(resource.driftStatus).toLowerCase() !== "insync");
  const started = formatTime(parseTimestamp(properties.startTime));
  const ended = formatTime(parseTimestamp(properties.endTime));
  return h(
    "div",
    { class: "drift", dataset: { result: result.name || "" } },
    h(
      "p",
      null,
      "Detection ",
      h("span", { class: `badge state-${stateFamily(properties.status)}` }, properties.status || "unknown"),
      started ? ` started ${started}` : "",
      ended ? `, ended ${ended}` : "",
      ".",
    ),
    properties.error ? h("p", { class: "error-title" }, h("code", null, properties.error.code || "Error"), " ", properties.error.message || "") : null,
    counts(countBy(resources, "driftStatus"), stateFamily),
    shown.length ? shown.map(driftEntry) : h("p", { class: "empty" }, resources.length ? "Every resource is in sync." : "No resource was read."),
  );
}
