"""The public form of a document's `source` and `doc_id`: what callers see instead of a path on the server.

The stores key a file by its absolute path, which must not tell callers where the server keeps its data, so
every place that hands a source to a caller passes it through `public_source`: its place inside the
tenant's upload folder (`<collection>/<file name>`), else its file name; a source that is not an absolute
path is public already. `stored_sources` maps a public form back, so deleting by a listed source works.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path, PurePath
from typing import Any, TypeVar, cast

#: The folder under the data directory that holds uploads, one subfolder per tenant, then per collection.
UPLOAD_FOLDER = "uploads"
#: Keys whose values name a document (and may be absolute paths).
SOURCE_KEYS = ("source", "doc_id")
#: Keys whose values are lists of such names (a deletion's summary).
SOURCE_LIST_KEYS = ("sources",)

Value = TypeVar("Value")
Json = TypeVar("Json")


def upload_folder(data_dir: Path, tenant: str) -> Path:
    """Where `tenant`'s uploads are kept (one subfolder per collection)."""
    return data_dir / UPLOAD_FOLDER / tenant


@lru_cache(maxsize=256)
def _upload_root(data_dir: str, tenant: str) -> PurePath:
    """The tenant's upload folder as ingestion names its files (resolved: sources are resolved paths)."""
    return upload_folder(Path(data_dir), tenant).resolve()


def public_source(value: str, *, tenant: str, data_dir: Path) -> str:
    """`value` (a source or doc id) as a caller may see it: an absolute path becomes its path inside
    `tenant`'s upload folder, else its file name; any other value is returned unchanged."""
    if not value or not PurePath(value).is_absolute():
        return value
    path = PurePath(value)
    try:
        return path.relative_to(_upload_root(str(data_dir), tenant)).as_posix()
    except ValueError:
        return path.name or value


def public_metadata(metadata: Mapping[str, Value], *, tenant: str, data_dir: Path) -> dict[str, Value | str]:
    """A copy of chunk metadata whose `source` and `doc_id` are in public form (other keys as they are)."""
    shown: dict[str, Value | str] = dict(metadata)
    for key in SOURCE_KEYS:
        value = shown.get(key)
        if isinstance(value, str):
            shown[key] = public_source(value, tenant=tenant, data_dir=data_dir)
    return shown


def stored_sources(given: str, stored: Iterable[str], *, tenant: str, data_dir: Path) -> list[str]:
    """The stored sources among `stored` (a tenant's documents) that `given` names: itself when stored as
    given (an absolute path, a `text:...` key), else those whose public form it is (a file name shown for
    files of several folders may name more than one)."""
    candidates = list(dict.fromkeys(stored))
    if given in candidates:
        return [given]
    return [
        source for source in candidates if public_source(source, tenant=tenant, data_dir=data_dir) == given
    ]


def public_json(value: Json, *, tenant: str, data_dir: Path) -> Json:
    """A copy of a JSON-ready response whose every `source` / `doc_id` value (and `sources` list), at any
    depth, is in public form: the one call a route makes on what it returns (ingestion's per-file results,
    failures and warnings, a deletion's summary, a listing), so no field added later slips a path out."""
    if isinstance(value, Mapping):
        shown: dict[Any, Any] = {}
        for key, item in value.items():
            if key in SOURCE_KEYS and isinstance(item, str):
                shown[key] = public_source(item, tenant=tenant, data_dir=data_dir)
            elif key in SOURCE_LIST_KEYS and isinstance(item, list) and all(isinstance(v, str) for v in item):
                shown[key] = [public_source(v, tenant=tenant, data_dir=data_dir) for v in item]
            else:
                shown[key] = public_json(item, tenant=tenant, data_dir=data_dir)
        return cast(Json, shown)
    if isinstance(value, list):
        return cast(Json, [public_json(item, tenant=tenant, data_dir=data_dir) for item in value])
    if isinstance(value, tuple):
        return cast(Json, tuple(public_json(item, tenant=tenant, data_dir=data_dir) for item in value))
    return value
