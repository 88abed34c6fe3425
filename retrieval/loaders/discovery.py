"""Finding files and reading their bytes safely: a `.txt` symlink to /dev/zero, a named pipe, a symlink loop
or a gzip / .docx bomb fails alone with a `LoaderError` naming the reason, never aborting or hanging a batch.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from retrieval.loaders.guard import LoaderError
from retrieval.loaders.registry import SUPPORTED_SUFFIXES, suffix_of

#: Bytes read per system call while reading a file (the size cap is checked after every read).
READ_BLOCK_BYTES = 1 << 20
#: Zip entries smaller than this are exempt from the compression-ratio check (they cannot hurt).
ZIP_RATIO_MIN_BYTES = 1 << 20
#: What a file that is not a regular one is, for the reason shown to the user.
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)

#: Zip-based files (.docx) whose entries inflate to more than this are refused before parsing (the size of
#: the largest file accepted).
MAX_UNZIPPED_BYTES = 50_000_000
#: Zip-based files with more entries are refused (a real .docx holds a few dozen).
MAX_ZIP_ENTRIES = 10_000
#: Zip entries over 1 MiB that inflate more than this many times are refused (XML compresses ~10x).
MAX_ZIP_RATIO = 200.0


def safe_resolve(path: Path) -> Path:
    """`path` with symlinks resolved, or made absolute when they cannot be (the file then fails alone)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's "Symlink loop from ..."
        return path.absolute()


def discover_files(paths: Iterable[Path]) -> list[Path]:
    """Expand folders into the supported, non-hidden files under them, in sorted order, without following
    symlinked folders; keep explicitly named files as given (the user then gets their reason).
    FileNotFoundError names the first path that does not exist."""
    found: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        try:
            os.lstat(path)
        except OSError:
            raise FileNotFoundError(f"no such file or directory: {path}") from None
        candidates = _walk_supported(path) if _is_directory(path) else [path]
        for candidate in candidates:
            key = safe_resolve(candidate)
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


def ensure_regular(path: Path) -> None:
    """LoaderError unless `path` is (or links to) a regular file: a cheap first check that reads nothing."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _open_error(exc) from exc
    if not stat.S_ISREG(mode):
        raise LoaderError(f"not a regular file ({_file_kind(mode)})")


def _file_kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def _open_error(exc: OSError) -> LoaderError:
    if exc.errno == errno.ELOOP:
        return LoaderError("symlink loop: the path never reaches a file")
    return LoaderError(f"unreadable file: {exc.strerror or exc}")


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes` bytes: opened non-blocking (a pipe with no
    writer would block), its type checked on the open descriptor, the cap enforced while reading (st_size is
    0 for devices and a file may grow)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _open_error(exc) from exc
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise LoaderError(f"not a regular file ({_file_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise LoaderError(f"file too large: {info.st_size} bytes > {max_bytes}")
        os.set_blocking(descriptor, True)
        blocks: list[bytes] = []
        total = 0
        while block := os.read(descriptor, min(READ_BLOCK_BYTES, max_bytes + 1 - total)):
            total += len(block)
            if total > max_bytes:
                raise LoaderError(f"file too large: more than {max_bytes} bytes (it grew while read)")
            blocks.append(block)
        return b"".join(blocks)
    except OSError as exc:
        raise LoaderError(f"unreadable file: {exc.strerror or exc}") from exc
    finally:
        os.close(descriptor)


def inflate_zip(data: bytes, kind: str) -> bytes:
    """The zip `data` rewritten with every entry stored uncompressed, inflated here 1 MiB at a time under
    MAX_UNZIPPED_BYTES: the directory's sizes are the attacker's to write, and zipfile's whole-entry `read()`
    inflates everything before it truncates, so the bytes really produced are counted."""
    _check_zip_directory(data, kind)
    inflated = 0
    copy = io.BytesIO()
    try:
        with (
            zipfile.ZipFile(io.BytesIO(data)) as archive,
            zipfile.ZipFile(copy, "w", compression=zipfile.ZIP_STORED) as stored,
        ):
            for entry in archive.infolist():
                if entry.is_dir():
                    continue
                with (
                    archive.open(entry) as source,
                    stored.open(entry.filename, "w", force_zip64=True) as target,
                ):
                    while block := source.read(READ_BLOCK_BYTES):
                        inflated += len(block)
                        if inflated > MAX_UNZIPPED_BYTES:
                            raise LoaderError(
                                f"zip bomb refused: inflates to more than {MAX_UNZIPPED_BYTES} bytes "
                                "(MAX_UNZIPPED_BYTES)"
                            )
                        target.write(block)
    except LoaderError:
        raise
    except Exception as exc:  # bad CRC, encryption, unknown methods, truncation: all corrupt
        raise LoaderError(f"corrupt {kind}: {str(exc) or type(exc).__name__}") from exc
    return copy.getvalue()


def _check_zip_directory(data: bytes, kind: str) -> None:
    """Refuse a zip whose directory promises too many entries, too many bytes or a bomb's ratio (cheap)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise LoaderError(f"corrupt {kind}: {exc}") from exc
    if len(entries) > MAX_ZIP_ENTRIES:
        raise LoaderError(f"zip bomb refused: {len(entries)} entries > {MAX_ZIP_ENTRIES} (MAX_ZIP_ENTRIES)")
    total = sum(entry.file_size for entry in entries)
    if total > MAX_UNZIPPED_BYTES:
        raise LoaderError(
            f"zip bomb refused: inflates to {total} bytes > {MAX_UNZIPPED_BYTES} (MAX_UNZIPPED_BYTES)"
        )
    for entry in entries:
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > ZIP_RATIO_MIN_BYTES and ratio > MAX_ZIP_RATIO:
            raise LoaderError(
                f"zip bomb refused: {entry.filename} inflates {ratio:.0f}x > {MAX_ZIP_RATIO:g}x "
                "(MAX_ZIP_RATIO)"
            )


def _is_hidden(name: str) -> bool:
    """Dot-files and dot-folders are tool state (.git, .venv, .DS_Store), never user content."""
    return name.startswith(".")


def _is_directory(path: Path) -> bool:
    """A folder (or a link to one); False for anything unreadable, which then fails as a file."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _walk_supported(root: Path) -> list[Path]:
    """Supported, non-hidden files under `root`, sorted by their path parts (`a.md`, `b/c.md`, `z.md`)."""
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if not _is_hidden(name)]
        for name in filenames:
            candidate = Path(folder) / name
            if not _is_hidden(name) and suffix_of(candidate) in SUPPORTED_SUFFIXES:
                found.append(candidate)
    return sorted(found, key=lambda path: path.relative_to(root).parts)


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """Decompress, refusing output beyond `max_bytes` so a small gzip cannot expand without bound."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            raw = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise LoaderError(f"corrupt gzip: {exc}") from exc
    if len(raw) > max_bytes:
        raise LoaderError(f"file too large: decompressed size > {max_bytes} bytes")
    return raw
