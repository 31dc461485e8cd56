// The dependency graph drawn as SVG by the console itself: a layered layout (each resource one column right
// of its furthest prerequisite, rows ordered by the average row of their neighbours to keep edges short),
// nodes coloured by state and labelled with it in words, and a text list of the same graph for screen readers.

import { h, s, truncate } from "./dom.js";
import { stateFamily } from "./model.js";

const NODE_WIDTH = 200;
const NODE_HEIGHT = 50;
const COLUMN_GAP = 64;
const ROW_GAP = 18;
const MARGIN = 12;
const ORDERING_SWEEPS = 4;

/** The height a waypoint of a long edge takes in its column. */
const WAYPOINT_HEIGHT = 10;

/**
 * Positions for `nodes` (with `key`) and `edges` (`{from, to}`): `{positions: Map(key → {x, y, layer, row}),
 * waypoints: Map("from\nto" → [{x, y}]), width, height}`. An edge spanning several columns passes through a
 * waypoint in each column between, which takes part in the row ordering, so it runs between the nodes there
 * instead of behind them. Cycles (which a valid plan has none of) do not stop the layout: their nodes go after
 * the rest.
 */
export function layout(nodes, edges) {
  const keys = nodes.map((node) => node.key);
  const known = new Set(keys);
  const incoming = new Map(keys.map((key) => [key, []]));
  const outgoing = new Map(keys.map((key) => [key, []]));
  const links = [];
  for (const { from, to } of edges) {
    if (known.has(from) && known.has(to) && from !== to) {
      outgoing.get(from).push(to);
      incoming.get(to).push(from);
      links.push({ from, to });
    }
  }
  // Longest path from the sources, in topological order (Kahn).
  const layer = new Map();
  const waiting = new Map(keys.map((key) => [key, incoming.get(key).length]));
  const queue = keys.filter((key) => waiting.get(key) === 0);
  for (const key of queue) {
    layer.set(key, 0);
  }
  for (let index = 0; index < queue.length; index += 1) {
    const key = queue[index];
    for (const next of outgoing.get(key)) {
      layer.set(next, Math.max(layer.get(next) || 0, layer.get(key) + 1));
      waiting.set(next, waiting.get(next) - 1);
      if (waiting.get(next) === 0) {
        queue.push(next);
      }
    }
  }
  let deepest = Math.max(-1, ...layer.values());
  const placed = new Set(queue);
  for (const key of keys) {
    if (!placed.has(key)) {
      deepest += 1;
      layer.set(key, deepest);
    }
  }
  // Waypoints: a chain of virtual nodes for every edge that skips columns (forward edges only).
  const virtual = new Set();
  const chains = new Map();
  const up = new Map(keys.map((key) => [key, []]));
  const down = new Map(keys.map((key) => [key, []]));
  for (const { from, to } of links) {
    const chain = [];
    let previous = from;
    for (let column = layer.get(from) + 1; column < layer.get(to); column += 1) {
      const point = `\u0000${from}\n${to}\n${column}`;
      virtual.add(point);
      layer.set(point, column);
      up.set(point, []);
      down.set(point, []);
      chain.push(point);
      down.get(previous).push(point);
      up.get(point).push(previous);
      previous = point;
    }
    down.get(previous).push(to);
    up.get(to).push(previous);
    chains.set(`${from}\n${to}`, chain);
  }
  const layers = [];
  for (const key of [...keys, ...virtual]) {
    const index = layer.get(key);
    (layers[index] = layers[index] || []).push(key);
  }
  for (let index = 0; index < layers.length; index += 1) {
    layers[index] = layers[index] || [];
  }
  const row = new Map();
  layers.forEach((keysOfLayer) => keysOfLayer.forEach((key, index) => row.set(key, index)));
  const barycenter = (key, neighbours) => {
    const rows = neighbours.get(key).map((other) => row.get(other));
    return rows.length ? rows.reduce((sum, value) => sum + value, 0) / rows.length : row.get(key);
  };
  for (let sweep = 0; sweep < ORDERING_SWEEPS; sweep += 1) {
    const downward = sweep % 2 === 0;
    const order = downward ? [...layers.keys()] : [...layers.keys()].reverse();
    for (const index of order) {
      const neighbours = downward ? up : down;
      const weights = new Map(layers[index].map((key) => [key, barycenter(key, neighbours)]));
      layers[index].sort((a, b) => weights.get(a) - weights.get(b) || row.get(a) - row.get(b));
      layers[index].forEach((key, position) => row.set(key, position));
    }
  }
  const heightOf = (key) => (virtual.has(key) ? WAYPOINT_HEIGHT : NODE_HEIGHT);
  const columnHeight = (keysOfLayer) =>
    keysOfLayer.reduce((sum, key) => sum + heightOf(key), 0) + Math.max(0, keysOfLayer.length - 1) * ROW_GAP;
  const tallest = Math.max(NODE_HEIGHT, ...layers.map(columnHeight));
  const positions = new Map();
  const centres = new Map();
  layers.forEach((keysOfLayer, index) => {
    // Short columns are centred against the tallest one.
    let y = MARGIN + (tallest - columnHeight(keysOfLayer)) / 2;
    const x = MARGIN + index * (NODE_WIDTH + COLUMN_GAP);
    keysOfLayer.forEach((key, position) => {
      if (virtual.has(key)) {
        centres.set(key, { x, y: y + WAYPOINT_HEIGHT / 2 });
      } else {
        positions.set(key, { x, y, layer: index, row: position });
      }
      y += heightOf(key) + ROW_GAP;
    });
  });
  const waypoints = new Map([...chains].map(([edge, chain]) => [edge, chain.map((point) => centres.get(point))]));
  return {
    positions,
    waypoints,
    width: MARGIN * 2 + Math.max(1, layers.length) * NODE_WIDTH + Math.max(0, layers.length - 1) * COLUMN_GAP,
    height: MARGIN * 2 + tallest,
  };
}

/** An SVG path from (x1, y1) through each waypoint (crossed horizontally, a node's width long) to (x2, y2). */
function edgePath(x1, y1, points, x2, y2) {
  const curve = (ax, ay, bx, by) => {
    const bend = Math.max(20, (bx - ax) / 2);
    return `C ${ax + bend} ${ay}, ${bx - bend} ${by}, ${bx} ${by}`;
  };
  let path = `M ${x1} ${y1}`;
  let x = x1;
  let y = y1;
  for (const point of points) {
    path += ` ${curve(x, y, point.x, point.y)} L ${point.x + NODE_WIDTH} ${point.y}`;
    x = point.x + NODE_WIDTH;
    y = point.y;
  }
  return `${path} ${curve(x, y, x2, y2)}`;
}

function shortType(type) {
  const parts = String(type || "").split("/");
  return parts[parts.length - 1] || "";
}

function stateWords(state) {
  return String(state || "unknown").replace(/([a-z])([A-Z])/g, "$1 $2");
}

/** Describes one node in words: name, type, state and what it waits for. */
function describe(node, prerequisites) {
  const waits = prerequisites.length ? `; depends on ${prerequisites.join(", ")}` : "";
  return `${node.label} (${node.type || "resource"}): ${stateWords(node.state)}${waits}`;
}

/**
 * The graph as an element: an SVG drawing (each node focusable and described) and a text list of the same
 * nodes. `hrefOf(node)` may give a console link for a node (a nested deployment).
 */
export function renderGraph(graph, { title, hrefOf } = {}) {
  if (!graph.nodes.length) {
    return h("p", { class: "empty" }, "No resources planned yet.");
  }
  const { positions, waypoints, width, height } = layout(graph.nodes, graph.edges);
  const byKey = new Map(graph.nodes.map((node) => [node.key, node]));
  const prerequisites = new Map(graph.nodes.map((node) => [node.key, []]));
  for (const edge of graph.edges) {
    if (byKey.has(edge.from) && prerequisites.has(edge.to)) {
      prerequisites.get(edge.to).push(byKey.get(edge.from).label);
    }
  }
  const titleId = `graph-title-${Math.random().toString(36).slice(2, 8)}`;
  const edgesGroup = s(
    "g",
    { class: "edges" },
    graph.edges
      .filter((edge) => positions.has(edge.from) && positions.has(edge.to))
      .map((edge) => {
        const from = positions.get(edge.from);
        const to = positions.get(edge.to);
        const x1 = from.x + NODE_WIDTH;
        const y1 = from.y + NODE_HEIGHT / 2;
        const x2 = to.x - 4;
        const y2 = to.y + NODE_HEIGHT / 2;
        return s("path", {
          class: `edge edge-to-${stateFamily(byKey.get(edge.to).state)}`,
          d: edgePath(x1, y1, waypoints.get(`${edge.from}\n${edge.to}`) || [], x2, y2),
          "marker-end": "url(#arrow)",
          dataset: { from: edge.from, to: edge.to },
        });
      }),
  );
  const nodesGroup = s(
    "g",
    { class: "nodes" },
    graph.nodes.map((node) => {
      const position = positions.get(node.key);
      const family = stateFamily(node.state);
      const description = describe(node, prerequisites.get(node.key));
      const shape = [
        s("title", null, node.id || description),
        s("rect", { x: position.x, y: position.y, width: NODE_WIDTH, height: NODE_HEIGHT, rx: 6, ry: 6 }),
        s("text", { x: position.x + 10, y: position.y + 20, class: "node-label" }, truncate(node.label, 24)),
        s(
          "text",
          { x: position.x + 10, y: position.y + 38, class: "node-detail" },
          truncate(`${shortType(node.type)} · ${stateWords(node.state)}`, 30),
        ),
      ];
      const attributes = {
        class: `node state-${family}`,
        role: "img",
        "aria-label": description,
        tabindex: "0",
        dataset: { key: node.key, state: node.state, label: node.label, focusKey: `graph:${node.key}` },
      };
      const href = hrefOf && hrefOf(node);
      if (href) {
        return s("a", { href, class: "node-link", dataset: { focusKey: `graph-link:${node.key}` } }, s("g", { ...attributes, tabindex: null }, shape));
      }
      return s("g", attributes, shape);
    }),
  );
  const svg = s(
    "svg",
    {
      class: "graph",
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "group",
      "aria-labelledby": titleId,
    },
    s("title", { id: titleId }, title || "Dependency graph"),
    s(
      "defs",
      null,
      s(
        "marker",
        { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }),
      ),
    ),
    edgesGroup,
    nodesGroup,
  );
  const legend = h(
    "ul",
    { class: "legend", "aria-label": "Node colours" },
    [
      ["pending", "pending / not started"],
      ["running", "running"],
      ["succeeded", "succeeded"],
      ["failed", "failed"],
      ["canceled", "canceled"],
    ].map(([family, words]) => h("li", null, h("span", { class: `swatch state-${family}`, "aria-hidden": "true" }), words)),
  );
  const text = h(
    "details",
    { class: "graph-text", dataset: { focusKey: "graph-text" } },
    h("summary", null, "The graph as a list"),
    h(
      "ul",
      null,
      graph.nodes.map((node) => h("li", null, describe(node, prerequisites.get(node.key)))),
    ),
  );
  return h("div", { class: "graph-block" }, h("div", { class: "graph-scroll", tabindex: "0", "aria-label": "Dependency graph, scrollable" }, svg), legend, text);
}
