"""Calls a running zarr-serve with the client openapi-python-client generated
from openapi.yaml (run by run_openapi_client.sh, which puts it on PYTHONPATH):
every model the data operations need was generated, and a GET by label and a
POST of points are answered with the values the stores hold.

    python openapi_client_check.py URL REPO_ROOT
"""
import json
import sys

from zarr_serve_client import Client
from zarr_serve_client.api.data import query_region, read_region
from zarr_serve_client.models import RegionJson, RegionQuery  # noqa: F401 (generated, not dropped)
from zarr_serve_client.models.query_region_format import QueryRegionFormat
from zarr_serve_client.models.read_region_format import ReadRegionFormat


def main():
    url = sys.argv[1]
    client = Client(base_url=url)
    r = read_region.sync_detailed(client=client, ds="stations", path="temperature",
                                  sel=["time=2020-01-05", "station=Oslo"], format_=ReadRegionFormat.JSON)
    assert r.status_code == 200, (r.status_code, r.content[:300])
    doc = json.loads(r.content)
    assert doc["shape"] == [] and isinstance(doc["data"], int), doc
    direct = json.loads(read_region.sync_detailed(client=client, ds="stations", path="temperature",
                                                  select="4,0", format_=ReadRegionFormat.JSON).content)
    assert direct["data"] == doc["data"], (direct, doc)

    body = RegionQuery.from_dict({"points": [[4, 0], [0, 4]]})
    r = query_region.sync_detailed(client=client, ds="stations", path="temperature", body=body,
                                   format_=QueryRegionFormat.JSON)
    assert r.status_code == 200, (r.status_code, r.content[:300])
    doc = json.loads(r.content)
    corner = json.loads(read_region.sync_detailed(client=client, ds="stations", path="temperature",
                                                  select="0,4", format_=ReadRegionFormat.JSON).content)
    assert doc["shape"] == [2] and doc["data"] == [direct["data"], corner["data"]], doc
    bad = query_region.sync_detailed(client=client, ds="stations", path="temperature",
                                      body=RegionQuery.from_dict({"points": [[99, 0]]}))
    assert bad.status_code == 400, bad.status_code
    print("openapi client: GET by label and POST of points answered as the stores hold")


if __name__ == "__main__":
    main()
