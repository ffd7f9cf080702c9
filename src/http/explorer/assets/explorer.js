// zarr-serve explorer: keeps the preview picture, the curl command and the
// Python snippet in step with the controls of an array page. The page works
// without it (the server renders the first preview); no other script runs.
"use strict";

(function () {
  const section = document.getElementById("preview");
  if (!section) {
    return;
  }
  const api = section.dataset.api;
  const coarsen = section.dataset.coarsen;
  const dataType = section.dataset.dtype;
  // "cf" for packed CF data: shown unpacked, fill values transparent.
  const decode = section.dataset.decode;
  const img = document.getElementById("preview-img");
  const curl = document.getElementById("curl");
  const python = document.getElementById("python");
  const caption = document.getElementById("preview-caption");
  const colormap = document.getElementById("colormap");
  const lo = document.getElementById("rescale-lo");
  const hi = document.getElementById("rescale-hi");
  const sliders = Array.from(section.querySelectorAll("input[type=range][data-dim]"));
  const pickers = Array.from(section.querySelectorAll("select[data-label-for]"));

  // The displayed dimensions: whole (":,:") or every n-th ("::4,::4").
  const tail = section.dataset.tail;

  function selectExpr() {
    return sliders.map((s) => s.value).concat([tail]).join(",");
  }

  function rescale() {
    if (lo.value === "" || hi.value === "") {
      return null;
    }
    const a = Number(lo.value);
    const b = Number(hi.value);
    return Number.isFinite(a) && Number.isFinite(b) && b >= a ? lo.value + "," + hi.value : null;
  }

  function pictureUrl() {
    let url = api + "?select=" + selectExpr();
    if (coarsen) {
      url += "&coarsen=" + coarsen;
    }
    if (decode) {
      url += "&decode=" + decode;
    }
    url += "&format=png&colormap=" + encodeURIComponent(colormap.value);
    const range = rescale();
    if (range) {
      url += "&rescale=" + encodeURIComponent(range);
    }
    return url;
  }

  function pythonSnippet() {
    return [
      "import io",
      "import numpy as np",
      "import requests",
      "",
      "r = requests.get(\"" + location.origin + api + "\", params={\"select\": \"" + selectExpr() + "\"" +
        (decode ? ", \"decode\": \"" + decode + "\"" : "") + ", \"format\": \"npy\"})",
      "r.raise_for_status()",
      "a = np.load(io.BytesIO(r.content))  # " + dataType,
      "print(a.shape, np.nanmin(a), np.nanmax(a))",
    ].join("\n");
  }

  function update() {
    for (const s of sliders) {
      document.getElementById(s.id + "-value").value = s.value;
    }
    for (const p of pickers) {
      p.value = document.getElementById("dim-" + p.dataset.labelFor).value;
    }
    const url = pictureUrl();
    if (img.getAttribute("src") !== url) {
      img.src = url;
    }
    img.alt = section.dataset.path + "[" + selectExpr() + "] drawn with " + colormap.value;
    curl.textContent = "curl -o preview.png '" + location.origin + url + "'";
    python.textContent = pythonSnippet();
    let text = "select=" + selectExpr();
    if (coarsen) {
      text += ", block means of " + coarsen.replace(",", "×");
    }
    const range = rescale();
    text += range ? ", rescale " + range : ", rescale: the finite values shown";
    if ((lo.value !== "" || hi.value !== "") && !range) {
      text += " (give both bounds, the second not below the first)";
    }
    caption.textContent = text + "; transparent: NaN";
  }

  // While a slider is dragged, ask for a picture once it rests a moment.
  let pending = null;
  function soon() {
    clearTimeout(pending);
    pending = setTimeout(update, 120);
  }

  for (const s of sliders) {
    s.addEventListener("input", soon);
    s.addEventListener("change", update);
  }
  for (const p of pickers) {
    p.addEventListener("change", () => {
      document.getElementById("dim-" + p.dataset.labelFor).value = p.value;
      update();
    });
  }
  colormap.addEventListener("change", update);
  lo.addEventListener("change", update);
  hi.addEventListener("change", update);
  document.getElementById("controls").addEventListener("submit", (e) => {
    e.preventDefault();
    update();
  });
  img.addEventListener("error", () => {
    caption.textContent = "The preview could not be drawn: open the picture's address for the error.";
  });
  update();
})();
