// The timeline of a deployment's operations: one row per resource with its state, start, end and duration in
// words, and a bar placed on the deployment's time axis (a running operation's bar grows until now).

import { h } from "./dom.js";
import { formatDuration, stateFamily, timelineRows } from "./model.js";

function clock(ms) {
  return Number.isFinite(ms) ? new Date(ms).toLocaleTimeString() : "";
}

/** The timeline of `operations` as a table, or a note when there are none. */
export function renderTimeline(operations, now) {
  const { rows, start, end } = timelineRows(operations, now);
  if (!rows.length) {
    return h("p", { class: "empty" }, "No operation has started yet.");
  }
  const span = Math.max(1, end - start);
  const body = rows.map((row) => {
    const family = stateFamily(row.state);
    const bar = h("span", {
      class: `bar state-${family}`,
      role: "presentation",
      dataset: { start: String(row.start), end: String(row.shownEnd) },
    });
    // Position through the CSSOM, which the Content-Security-Policy allows (style attributes it does not).
    bar.style.marginLeft = `${(((row.start - start) / span) * 100).toFixed(2)}%`;
    bar.style.width = `${Math.max(0.6, ((row.shownEnd - row.start) / span) * 100).toFixed(2)}%`;
    const duration = row.end === null ? `${formatDuration(now - row.start)} so far` : formatDuration(row.end - row.start);
    return h(
      "tr",
      { class: `timeline-row state-${family}`, dataset: { key: row.key, state: row.state } },
      h("th", { scope: "row" }, row.label, h("span", { class: "muted block" }, row.type)),
      h("td", null, row.operation),
      h("td", null, h("span", { class: `badge state-${family}` }, row.state)),
      h("td", null, clock(row.start)),
      h("td", null, row.end === null ? "running" : clock(row.end)),
      h("td", null, duration),
      h("td", { class: "bar-cell" }, h("span", { class: "track" }, bar)),
    );
  });
  return h(
    "table",
    { class: "data timeline" },
    h("caption", { class: "visually-hidden" }, "Operations of the last deployment, earliest first"),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        ["Resource", "Operation", "State", "Started", "Ended", "Duration"].map((title) => h("th", { scope: "col" }, title)),
        h("th", { scope: "col", class: "bar-cell" }, `Time (${formatDuration(span)} in all)`),
      ),
    ),
    h("tbody", null, body),
  );
}
