"""openapi.yaml is valid YAML, served as it is committed, and documents every
query parameter a region read takes (src/http/query.rs DATA_PARAMETERS)."""

from __future__ import annotations

import re

import requests
import yaml

from common import BASE_URL, REPO_ROOT

SPEC = REPO_ROOT / "openapi.yaml"


def test_openapi_is_valid_and_served():
    doc = yaml.safe_load(SPEC.read_text())
    assert doc["openapi"].startswith("3.1")
    served = requests.get(f"{BASE_URL}/openapi.yaml", timeout=30)
    assert served.status_code == 200 and served.text == SPEC.read_text()


def test_every_region_parameter_is_documented():
    doc = yaml.safe_load(SPEC.read_text())
    source = (REPO_ROOT / "src/http/query.rs").read_text()
    block = re.search(r"DATA_PARAMETERS: \[&str; \d+\] = \[(.*?)\];", source, re.S).group(1)
    names = set(re.findall(r'"(\w+)"', block))
    params = doc["components"]["parameters"]
    for route in ("/v1/datasets/{ds}/data", "/v1/datasets/{ds}/data/{path}"):
        refs = [p["$ref"].rsplit("/", 1)[1] for p in doc["paths"][route]["parameters"]]
        documented = {params[r]["name"] for r in refs if params[r]["in"] == "query"}
        assert names <= documented, (route, names - documented)
