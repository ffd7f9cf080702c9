// zarr-serve explorer: the map of a geo variable (contract 3.3). Leaflet
// (built in, /explore-assets/leaflet.js) shows the variable's Web Mercator
// tiles from its TileJSON; the colour bar is WMS GetLegendGraphic and the
// value under the cursor WMS GetFeatureInfo. The map follows the preview's
// controls: the label picked for each other dimension (sel=), the colormap
// and the rescale range. Coastlines and borders (Natural Earth 1:110m, from
// the world-atlas package, built in at /explore-assets/countries-110m.json)
// are drawn over the field, and can be turned off.
"use strict";

(function () {
  const section = document.getElementById("map");
  if (!section || typeof L === "undefined") {
    return;
  }
  const layer = section.dataset.layer;
  const wms = section.dataset.wms;
  const tilejson = section.dataset.tilejson;
  const [west, south, east, north] = section.dataset.bounds.split(",").map(Number);
  const legend = document.getElementById("map-legend");
  const readout = document.getElementById("map-value");
  const xyz = document.getElementById("map-xyz");
  const colormap = document.getElementById("colormap");
  const lo = document.getElementById("rescale-lo");
  const hi = document.getElementById("rescale-hi");
  const pickers = Array.from(document.querySelectorAll("select[data-label-for][data-name]"));

  // Whole zooms: Leaflet leaves hairline gaps between tiles at fractional ones.
  const map = L.map("map-view", { worldCopyJump: true, minZoom: 0 });
  // The grid's cells, west > east across the antimeridian.
  const eastEdge = east < west ? east + 360 : east;
  map.fitBounds([[south, west], [north, eastEdge]]);
  map.attributionControl.setPrefix("Leaflet");
  let tiles = null;
  section.zsMap = map; // for the browser tests
  addOutlines(map, section);

  function range() {
    const a = Number(lo.value);
    const b = Number(hi.value);
    return lo.value !== "" && hi.value !== "" && Number.isFinite(a) && Number.isFinite(b) && b >= a
      ? lo.value + "," + hi.value
      : null;
  }

  // The labels picked for the other dimensions: [name, label] pairs.
  function picked() {
    return pickers.map((p) => [p.dataset.name, p.options[p.selectedIndex].text]);
  }

  // The TileJSON template with this view's parameters.
  function tileQuery() {
    const q = new URLSearchParams({ variable: layer, colormap: colormap.value });
    const r = range();
    if (r) {
      q.set("rescale", r);
    }
    for (const [name, label] of picked()) {
      q.append("sel", name + "=" + label);
    }
    return q.toString();
  }

  function wmsQuery(request, extra) {
    const q = new URLSearchParams({ SERVICE: "WMS", VERSION: "1.3.0", REQUEST: request });
    for (const [k, v] of Object.entries(extra)) {
      q.set(k, v);
    }
    const r = range();
    if (r) {
      q.set("COLORSCALERANGE", r);
    }
    for (const [name, label] of picked()) {
      q.set("DIM_" + name, label);
    }
    return wms + "?" + q.toString();
  }

  let loading = 0;
  async function update() {
    const mine = ++loading;
    const response = await fetch(tilejson.split("?")[0] + "?" + tileQuery());
    if (!response.ok || mine !== loading) {
      return;
    }
    const doc = await response.json();
    const template = doc.tiles[0];
    if (tiles) {
      tiles.setUrl(template);
    } else {
      tiles = L.tileLayer(template, {
        tileSize: 256,
        maxNativeZoom: Math.max(doc.maxzoom, 0),
        maxZoom: 24,
        attribution: doc.attribution || "",
        crossOrigin: true,
      }).addTo(map);
      tiles.on("tileerror", () => section.classList.add("tile-error"));
    }
    xyz.textContent = template;
    legend.src = wmsQuery("GetLegendGraphic", { LAYER: layer, STYLE: colormap.value, WIDTH: 20, HEIGHT: 256 });
  }

  // The value under the cursor, asked once the pointer rests a moment.
  let pending = null;
  let asked = 0;
  function showValue(latlng) {
    const lon = ((latlng.lng + 180) % 360 + 360) % 360 - 180;
    const lat = latlng.lat;
    const d = 1e-6;
    const url = wmsQuery("GetFeatureInfo", {
      LAYERS: layer, QUERY_LAYERS: layer, STYLES: "", CRS: "CRS:84", INFO_FORMAT: "application/json",
      BBOX: [lon - d, lat - d, lon + d, lat + d].join(","), WIDTH: 3, HEIGHT: 3, I: 1, J: 1,
    });
    const mine = ++asked;
    fetch(url)
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((doc) => {
        if (mine !== asked) {
          return;
        }
        const value = doc.features[0].properties.value;
        readout.dataset.lon = lon;
        readout.dataset.lat = lat;
        readout.dataset.value = value === null ? "" : value;
        readout.textContent = lon.toFixed(3) + ", " + lat.toFixed(3) + ": " +
          (value === null ? "no value" : Number(value).toPrecision(6));
      })
      .catch(() => {
        readout.textContent = "no value here";
      });
  }
  map.on("mousemove", (e) => {
    clearTimeout(pending);
    pending = setTimeout(() => showValue(e.latlng), 150);
  });

  for (const control of [colormap, lo, hi, ...pickers]) {
    control.addEventListener("change", update);
  }
  // A slider moves its picker through the preview's script: follow it.
  for (const s of document.querySelectorAll("input[type=range][data-dim]")) {
    s.addEventListener("change", () => setTimeout(update, 0));
  }
  update();
})();

// The arcs of a TopoJSON topology as [lat, lng] lines: quantized positions,
// each arc's after its first given as differences (the TopoJSON spec).
function topologyArcs(topology) {
  const [kx, ky] = topology.transform.scale;
  const [dx, dy] = topology.transform.translate;
  return topology.arcs.map((arc) => {
    let x = 0;
    let y = 0;
    return arc.map(([ax, ay]) => {
      x += ax;
      y += ay;
      return [y * ky + dy, x * kx + dx];
    });
  });
}

// A line cut where it is not a coast or a border: where Natural Earth's
// polygons are closed along the antimeridian or below Antarctica, and
// where a step crosses the antimeridian (a jump of more than 180 degrees).
function drawnParts(line) {
  const edge = (a, b) =>
    (Math.abs(Math.abs(a[1]) - 180) < 1e-3 && Math.abs(Math.abs(b[1]) - 180) < 1e-3) ||
    (a[0] < -84.5 && b[0] < -84.5) ||
    Math.abs(a[1] - b[1]) > 180;
  const parts = [];
  let part = [line[0]];
  for (let i = 1; i < line.length; i++) {
    if (edge(line[i - 1], line[i])) {
      if (part.length > 1) {
        parts.push(part);
      }
      part = [];
    }
    part.push(line[i]);
  }
  if (part.length > 1) {
    parts.push(part);
  }
  return parts;
}

// The indices of the arcs an object's polygons use (~i is arc i reversed).
function arcsOf(object) {
  const used = new Set();
  const walk = (a) => (Array.isArray(a) ? a.forEach(walk) : used.add(a < 0 ? ~a : a));
  for (const g of object.geometries) {
    walk(g.arcs || []);
  }
  return used;
}

// Coastlines (the arcs of land) and borders (the other arcs of countries)
// over the tiles, repeated a world east and west as the tiles are; an
// overlay the layers control turns off.
function addOutlines(map, section) {
  fetch("/explore-assets/countries-110m.json")
    .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
    .then((topology) => {
      const arcs = topologyArcs(topology);
      const coast = arcsOf(topology.objects.land);
      const shifted = (line, by) => line.map(([lat, lng]) => [lat, lng + by]);
      const group = L.layerGroup();
      for (const [kind, style] of [
        ["border", { color: "#333", weight: 0.8, opacity: 0.8, dashArray: "3 3" }],
        ["coast", { color: "#111", weight: 1.2, opacity: 0.9 }],
      ]) {
        const chosen = arcs.filter((_, i) => coast.has(i) === (kind === "coast")).flatMap(drawnParts);
        for (const by of [-360, 0, 360]) {
          const copy = chosen.map((line) => shifted(line, by));
          group.addLayer(L.polyline(copy, { ...style, interactive: false, className: "outline-" + kind }));
        }
      }
      group.addTo(map);
      L.control.layers(null, { "Coastlines and borders": group }, { collapsed: false }).addTo(map);
      map.attributionControl.addAttribution("Natural Earth");
      section.zsOutlines = { group: group, coast: coast.size, border: arcs.length - coast.size };
      section.dataset.outlines = "loaded";
    })
    .catch(() => {
      section.dataset.outlines = "failed";
    });
}
