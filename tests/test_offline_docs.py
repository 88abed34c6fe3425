"""`/docs` and `/redoc` work without internet: the pages and every file they load come from the app itself.

FastAPI's default pages load Swagger UI and ReDoc from a CDN, so offline they were blank. Every `src` and
`href` of the HTML (and the OpenAPI document it names) is fetched from the app, and no absolute URL to any
host is left in the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from config.settings import load_settings
from service.api.app import create_app

#: Attribute values and quoted JS strings that name a file the page loads.
REFERENCE = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']|url\s*:\s*['"]([^'"]+)['"]""")
ABSOLUTE_URL = re.compile(r"https?://", re.IGNORECASE)


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    """The app without its lifespan: nothing is warmed up, only the pages are served."""
    return TestClient(create_app(load_settings(data_dir=tmp_path / "rag")))


@pytest.mark.parametrize(("page", "library"), [("/docs", "swagger-ui"), ("/redoc", "redoc")])
def test_the_docs_pages_and_their_files_are_served_by_the_app(
    client: TestClient, page: str, library: str
) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert ABSOLUTE_URL.findall(html) == [], html
    references = [a or b for a, b in REFERENCE.findall(html)]
    assert "/openapi.json" in references
    scripts = [ref for ref in references if ref.endswith(".js")]
    assert any(library in ref for ref in scripts), references
    for reference in references:
        assert reference.startswith("/"), reference  # the app's own path, no host
        loaded = client.get(reference)
        assert loaded.status_code == 200, reference
        assert loaded.content, reference
    for script in scripts:
        assert len(client.get(script).content) > 100_000  # the library itself, not a stub or a redirect
