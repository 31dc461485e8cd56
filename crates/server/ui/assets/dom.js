// Building the page without markup strings: every value from the server becomes a text node or an attribute
// value, never markup parsed as HTML, so data cannot inject elements or scripts.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    if (Array.isArray(child)) {
      append(parent, child);
    } else if (child instanceof Node) {
      parent.appendChild(child);
    } else {
      parent.appendChild(document.createTextNode(String(child)));
    }
  }
}

function apply(element, attributes) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) {
        element.addEventListener(event, handler);
      }
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "href") {
      element.setAttribute("href", safeHref(value));
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return element;
}

/** Links stay inside the console: a fragment, or a path of this server. */
function safeHref(value) {
  const text = String(value);
  return text.startsWith("#") || (text.startsWith("/") && !text.startsWith("//")) ? text : "#/";
}

/** An HTML element: `h("a", {href: "#/x", class: "c"}, "text", child, [more])`. */
export function h(tag, attributes, ...children) {
  const element = apply(document.createElement(tag), attributes);
  append(element, children);
  return element;
}

/** An SVG element, like `h`. */
export function s(tag, attributes, ...children) {
  const element = apply(document.createElementNS(SVG_NS, tag), attributes);
  append(element, children);
  return element;
}

/** A coloured state label that also says the state in words (colour is never the only cue). */
export function badge(state, family) {
  const text = state || "unknown";
  return h("span", { class: `badge state-${family}` }, text);
}

/** An error as a message block: code, message and the details' messages. */
export function errorBlock(error, title) {
  const details = Array.isArray(error.details) ? error.details : [];
  return h(
    "div",
    { class: "error-block", role: "alert" },
    title ? h("p", { class: "error-title" }, title) : null,
    h("p", null, h("code", null, error.code || "Error"), " ", error.message || ""),
    details.length
      ? h(
          "ul",
          null,
          details.map((detail) =>
            h("li", null, h("code", null, detail.code || ""), " ", detail.message || "", detail.target ? ` (${detail.target})` : ""),
          ),
        )
      : null,
  );
}

/** A table with a caption, column headers and rows of cells (strings or nodes). */
export function table(caption, columns, rows, { captionHidden = false, className = "" } = {}) {
  return h(
    "table",
    { class: `data ${className}`.trim() },
    h("caption", { class: captionHidden ? "visually-hidden" : null }, caption),
    h("thead", null, h("tr", null, columns.map((column) => h("th", { scope: "col" }, column)))),
    h(
      "tbody",
      null,
      rows.map((cells) =>
        h(
          "tr",
          null,
          cells.map((cell, index) => (index === 0 ? h("th", { scope: "row" }, cell) : h("td", null, cell))),
        ),
      ),
    ),
  );
}

/** A description list of [term, value] pairs, leaving out empty values. */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs
      .filter(([, value]) => value !== null && value !== undefined && value !== "")
      .map(([term, value]) => [h("dt", null, term), h("dd", null, value)]),
  );
}

/** A section with a heading of level `level` and an id for in-page links. */
export function section(id, title, level, ...children) {
  const headingId = `${id}-heading`;
  return h(
    "section",
    { class: "panel", id, "aria-labelledby": headingId },
    h(`h${level}`, { id: headingId }, title),
    ...children,
  );
}

/** Shortens long text for a fixed-width place, keeping the whole text available to the caller. */
export function truncate(text, max) {
  const value = String(text);
  return value.length <= max ? value : `${value.slice(0, Math.max(1, max - 1))}…`;
}
