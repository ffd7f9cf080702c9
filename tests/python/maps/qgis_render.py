"""Render one raster layer of zarr-serve (a WMS layer or XYZ tiles) headless
with QGIS, for test_map_clients.py. Debian's python3-qgis belongs to
Debian's Python, so the test runs this file with it:

    QT_QPA_PLATFORM=offscreen /usr/bin/python3 qgis_render.py JOB.json

JOB: {"provider": "wms", "uri": "<QGIS data source>", "crs": "EPSG:4326",
      "extent": [xmin, ymin, xmax, ymax], "size": [width, height], "out": "map.png"}
Writes the map (transparent background) to `out` and prints one JSON line:
the layer's validity and error, the rendering's errors, the URLs QGIS asked for.
"""

import json
import sys

from qgis.core import (
    Qgis,
    QgsApplication,
    QgsCoordinateReferenceSystem,
    QgsMapRendererParallelJob,
    QgsMapSettings,
    QgsNetworkAccessManager,
    QgsNetworkRequestParameters,
    QgsRasterLayer,
    QgsRectangle,
)
from qgis.PyQt.QtCore import QSize
from qgis.PyQt.QtGui import QColor


def main():
    with open(sys.argv[1]) as f:
        job = json.load(f)
    app = QgsApplication([], False)
    app.setPrefixPath("/usr", True)
    app.initQgis()
    asked = []
    QgsNetworkAccessManager.instance().requestAboutToBeCreated[QgsNetworkRequestParameters].connect(
        lambda request: asked.append(request.request().url().toString()))
    layer = QgsRasterLayer(job["uri"], "zarr-serve", job["provider"])
    result = {"qgis": Qgis.version(), "valid": layer.isValid(), "errors": []}
    if not layer.isValid():
        error = layer.error()  # held: summary() of the temporary crashes QGIS 3.22
        result["error"] = error.summary()
    if layer.isValid():
        settings = QgsMapSettings()
        settings.setLayers([layer])
        settings.setDestinationCrs(QgsCoordinateReferenceSystem(job["crs"]))
        settings.setOutputSize(QSize(*job["size"]))
        settings.setExtent(QgsRectangle(*job["extent"]))
        settings.setBackgroundColor(QColor(0, 0, 0, 0))
        render = QgsMapRendererParallelJob(settings)
        render.start()
        render.waitForFinished()
        render.renderedImage().save(job["out"], "PNG")
        result["errors"] = [f"{e.layerID}: {e.message}" for e in render.errors()]
        result["extent"] = [settings.visibleExtent().xMinimum(), settings.visibleExtent().yMinimum(),
                            settings.visibleExtent().xMaximum(), settings.visibleExtent().yMaximum()]
    app.processEvents()  # signals queued from the rendering threads
    result["requests"] = asked
    print(json.dumps(result))
    app.exitQgis()


if __name__ == "__main__":
    main()
